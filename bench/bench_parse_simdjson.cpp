/*
 * bench_parse_simdjson.cpp: simdjson (3.0, Debian's libsimdjson-dev) as a `simdjson-json`
 * parser cell (bench_json.h): its DOM parser, one per writer and reused (its buffers then
 * stay allocated), then the tree written into BSON. The event is copied into a buffer of
 * the writer's with the SIMDJSON_PADDING bytes simdjson reads past the end. The only C++ in
 * stele, compiled only when pkg-config finds simdjson and a C++ compiler is there.
 */
#include "bench_json.h"

#include <cstdint>
#include <cstring>
#include <new>
#include <simdjson.h>
#include <vector>

namespace
{

struct simdjson_bench {
    simdjson::dom::parser parser;
    std::vector<char> text; /* the event, then SIMDJSON_PADDING bytes */
};

bool simdjson_bench_value(bson_t *parent, const char *key, int key_len, simdjson::dom::element v,
                          int depth);

bool
simdjson_bench_object(bson_t *parent, const char *key, int key_len, simdjson::dom::object obj,
                      int depth)
{
    bson_t child;
    if (depth > BENCH_JSON_MAX_DEPTH || !bson_append_document_begin(parent, key, key_len, &child))
        return false;
    bool ok = true;
    for (simdjson::dom::key_value_pair field : obj) {
        ok = ok && simdjson_bench_value(&child, field.key.data(),
                                        static_cast<int>(field.key.size()), field.value, depth + 1);
    }
    return bson_append_document_end(parent, &child) && ok;
}

bool
simdjson_bench_array(bson_t *parent, const char *key, int key_len, simdjson::dom::array arr,
                     int depth)
{
    bson_t child;
    if (depth > BENCH_JSON_MAX_DEPTH || !bson_append_array_begin(parent, key, key_len, &child))
        return false;
    bool ok = true;
    uint32_t i = 0;
    for (simdjson::dom::element v : arr) {
        char buf[16];
        const char *index;
        size_t n = bson_uint32_to_string(i++, &index, buf, sizeof buf);
        ok = ok && simdjson_bench_value(&child, index, static_cast<int>(n), v, depth + 1);
    }
    return bson_append_array_end(parent, &child) && ok;
}

bool
simdjson_bench_value(bson_t *parent, const char *key, int key_len, simdjson::dom::element v,
                     int depth)
{
    switch (v.type()) {
    case simdjson::dom::element_type::OBJECT:
        return simdjson_bench_object(parent, key, key_len, v.get_object().value_unsafe(), depth);
    case simdjson::dom::element_type::ARRAY:
        return simdjson_bench_array(parent, key, key_len, v.get_array().value_unsafe(), depth);
    case simdjson::dom::element_type::STRING: {
        std::string_view s = v.get_string().value_unsafe();
        return bson_append_utf8(parent, key, key_len, s.data(), static_cast<int>(s.size()));
    }
    case simdjson::dom::element_type::INT64:
        bench_json_append_integer(parent, key, key_len, v.get_int64().value_unsafe());
        return true;
    case simdjson::dom::element_type::UINT64:
        return false; /* past int64: libbson refuses it */
    case simdjson::dom::element_type::DOUBLE:
        return bson_append_double(parent, key, key_len, v.get_double().value_unsafe());
    case simdjson::dom::element_type::BOOL:
        return bson_append_bool(parent, key, key_len, v.get_bool().value_unsafe());
    case simdjson::dom::element_type::NULL_VALUE:
        return bson_append_null(parent, key, key_len);
    }
    return false;
}

void *
simdjson_bench_new(void)
{
    return new (std::nothrow) simdjson_bench();
}

void
simdjson_bench_free(void *parser)
{
    delete static_cast<simdjson_bench *>(parser);
}

int
simdjson_bench_to_bson(void *parser, const char *json, size_t len, bson_t *out)
{
    simdjson_bench *s = static_cast<simdjson_bench *>(parser);
    bson_reinit(out);
    if (s->text.size() < len + simdjson::SIMDJSON_PADDING)
        s->text.resize(len + simdjson::SIMDJSON_PADDING);
    std::memcpy(s->text.data(), json, len);
    simdjson::dom::element root;
    if (s->parser.parse(s->text.data(), len, false).get(root) != simdjson::SUCCESS)
        return -1;
    simdjson::dom::object obj;
    if (root.get_object().get(obj) != simdjson::SUCCESS)
        return -1;
    for (simdjson::dom::key_value_pair field : obj) {
        if (!simdjson_bench_value(out, field.key.data(), static_cast<int>(field.key.size()),
                                  field.value, 2))
            return -1;
    }
    return 0;
}

} // namespace

extern "C" const bench_json_def_t bench_json_simdjson = {
    "simdjson-json",     "simdjson's DOM parser and tree",
    simdjson_bench_new,  simdjson_bench_to_bson,
    simdjson_bench_free,
};
