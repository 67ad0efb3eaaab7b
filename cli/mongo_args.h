/*
 * mongo_args.h: the MongoDB flags shared by ship, verify, serve and tail: --mongo URI,
 * --db NAME, --collection NAME, and --sink NAME where the command keeps a checkpoint.
 * A command puts CLI_MONGO_OPTIONS (and CLI_SINK_OPTION) in its option table and hands every
 * option code to cli_mongo_take() first. Internal to cli/.
 */
#ifndef STELE_CLI_MONGO_ARGS_H
#define STELE_CLI_MONGO_ARGS_H

#include <getopt.h>

#include <stele.h>

/* Option codes: below CLI_OPT_COMMON_BASE (args.h) and above any command's own. */
enum {
    CLI_OPT_MONGO = 900,
    CLI_OPT_DB,
    CLI_OPT_COLLECTION,
    CLI_OPT_SINK,
};
#define CLI_MONGO_OPTIONS                                                                          \
    {"mongo", required_argument, NULL, CLI_OPT_MONGO},                                             \
        {"db", required_argument, NULL, CLI_OPT_DB},                                               \
    {                                                                                              \
        "collection", required_argument, NULL, CLI_OPT_COLLECTION                                  \
    }
#define CLI_SINK_OPTION                                                                            \
    {                                                                                              \
        "sink", required_argument, NULL, CLI_OPT_SINK                                              \
    }
/* Help lines for --db and --collection (the defaults are the engine's, docs/mongodb.md). */
#define CLI_MONGO_NAMES_USAGE                                                                      \
    "      --db NAME          database (default: the URI's path, else audit)\n"                    \
    "      --collection NAME  collection (default: events)\n"

/* Returned by cli_mongo_take() for an option code that is not one of the MongoDB flags. */
#define CLI_MONGO_NOT_MINE (-1)

typedef struct cli_mongo {
    stele_sink_options_t sink; /* sink.uri is NULL when --mongo was not given */
    int has_names;             /* --db, --collection or --sink was given */
} cli_mongo_t;

/* Fills the sink with the engine's defaults (stele_sink_options_init) and no URI. */
void cli_mongo_init(cli_mongo_t *m);

/* Takes option code `c`: 0 when it was a MongoDB flag and is recorded, CLI_EXIT_USAGE after
 * printing why its value is wrong, CLI_MONGO_NOT_MINE for any other code. */
int cli_mongo_take(cli_mongo_t *m, const char *command, int c, const char *arg);

/* After parsing: a usage error when --db/--collection/--sink came without --mongo, or when
 * is_required and --mongo is missing. Returns 0 or CLI_EXIT_USAGE (printed). */
int cli_mongo_check(const cli_mongo_t *m, const char *command, int is_required);

/* Accepts "mongodb://..." and "mongodb+srv://..." with a host; the library checks the rest. */
int cli_uri_looks_valid(const char *uri);

#endif /* STELE_CLI_MONGO_ARGS_H */
