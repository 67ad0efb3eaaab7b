/*
 * mongo_args.c: the MongoDB flags of ship, verify, serve and tail (see mongo_args.h). Only
 * records what was given and checks its shape: a URI that cannot be one is refused here
 * without echoing it (it may hold a password); connecting, and every finer check of the
 * URI, is the library's. The sink's defaults come from stele_sink_options_init(). No state.
 */
#include "mongo_args.h"

#include <string.h>

#include "args.h"
#include "report.h"

_Static_assert(CLI_OPT_SINK < CLI_OPT_COMMON_BASE,
               "the MongoDB option codes must stay below the common flags'");

int
cli_uri_looks_valid(const char *uri)
{
    static const char *const schemes[] = {"mongodb://", "mongodb+srv://"};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i]);
        if (strncmp(uri, schemes[i], n) == 0) {
            const char *host = uri + n;
            return host[0] != '\0' && host[0] != '/' && host[0] != '?';
        }
    }
    return 0;
}

void
cli_mongo_init(cli_mongo_t *m)
{
    memset(m, 0, sizeof *m);
    stele_sink_options_init(&m->sink);
}

int
cli_mongo_take(cli_mongo_t *m, const char *command, int c, const char *arg)
{
    switch (c) {
    case CLI_OPT_MONGO:
        if (!cli_uri_looks_valid(arg))
            /* not echoed: it may hold a password */
            return cli_usage_error(command, "--mongo value is not a mongodb:// URI "
                                            "(mongodb://[user:pass@]host[:port]/[db])");
        m->sink.uri = arg;
        return 0;
    case CLI_OPT_DB:
        m->sink.database = arg;
        break;
    case CLI_OPT_COLLECTION:
        m->sink.collection = arg;
        break;
    case CLI_OPT_SINK:
        m->sink.name = arg;
        break;
    default:
        return CLI_MONGO_NOT_MINE;
    }
    if (arg[0] == '\0')
        return cli_usage_error(command, "%s needs a name",
                               c == CLI_OPT_DB           ? "--db"
                               : c == CLI_OPT_COLLECTION ? "--collection"
                                                         : "--sink");
    m->has_names = 1;
    return 0;
}

int
cli_mongo_check(const cli_mongo_t *m, const char *command, int is_required)
{
    if (m->sink.uri == NULL && is_required)
        return cli_usage_error(command, "--mongo URI is required");
    if (m->sink.uri == NULL && m->has_names)
        return cli_usage_error(command, "--db, --collection and --sink need --mongo URI");
    return 0;
}
