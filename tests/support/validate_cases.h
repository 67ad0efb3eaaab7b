/*
 * validate_cases.h: the table of malformed JSON events (each with its code and a fragment its
 * message must hold) and the events that must pass, shared by test_validate.c, which asserts
 * them, and the fuzz target fuzz_json_bson.c, which starts its corpus from them.
 */
#ifndef STELE_TEST_VALIDATE_CASES_H
#define STELE_TEST_VALIDATE_CASES_H

#include "stele.h"

typedef struct json_case {
    const char *name;
    const char *json;
    int code;
    const char *fragment; /* must appear in the message */
} json_case_t;

static const json_case_t json_cases[] = {
    {"empty text", "", STELE_EEMPTY, "empty"},
    {"only whitespace", " \n\t ", STELE_EEMPTY, "whitespace"},
    {"object without fields", "{}", STELE_EEMPTY, "no fields"},
    {"array", "[1,2]", STELE_ENOTOBJECT, "an array"},
    {"number", "42", STELE_ENOTOBJECT, "a number"},
    {"string", "\"text\"", STELE_ENOTOBJECT, "a string"},
    {"boolean", "true", STELE_ENOTOBJECT, "a boolean"},
    {"null", "null", STELE_ENOTOBJECT, "null"},
    {"garbage", "hello", STELE_EJSON, "byte 0"},
    {"truncated after colon", "{\"a\":", STELE_EJSON, "ends inside"},
    {"truncated before brace", "{\"a\":1", STELE_EJSON, "ends inside"},
    {"truncated inside string", "{\"a\":\"abc", STELE_EJSON, "ends inside"},
    {"missing colon", "{\"a\" 1}", STELE_EJSON, "byte 5: ':' expected"},
    {"array strings without a comma", "{\"a\":[\"x\" \"y\"]}", STELE_EJSON, "byte 10: ','"},
    {"array string then a number", "{\"a\":[\"x\" 1]}", STELE_EJSON, "byte 10: ','"},
    {"single quotes", "{'a':1}", STELE_EJSON, "byte 2: 'a' is not json"},
    {"two objects", "{\"a\":1}{\"b\":2}", STELE_EJSON, "byte 7: data after the event"},
    {"trailing garbage", "{\"a\":1} x", STELE_EJSON, "byte 8"},
    {"NaN", "{\"n\":NaN}", STELE_EJSON, "NaN"},
    {"invalid utf-8 in a string", "{\"a\":\"\xff\"}", STELE_EUTF8, "string at byte 5"},
    {"invalid utf-8 in a key", "{\"\xc3\":1}", STELE_EUTF8, "key at byte 1"},
    {"lone surrogate escape", "{\"a\":\"\\ud800\"}", STELE_EUTF8, "unicode"},
    {"NUL in a key", "{\"a\\u0000b\":1}", STELE_EKEYNUL, "byte 1"},
    {"dollar key at top level", "{\"$set\":1}", STELE_EDOLLARKEY, "\"$set\""},
    {"dollar key at depth 3", "{\"a\":{\"b\":{\"$where\":1}}}", STELE_EDOLLARKEY, "\"a.b.$where\""},
    {"dollar key inside an array", "{\"a\":[{\"$x\":1}]}", STELE_EDOLLARKEY, "\"a.0.$x\""},
    {"extended json wrapper", "{\"t\":{\"$date\":1}}", STELE_EDOLLARKEY, "\"t.$date\" at byte 6"},
    {"escaped dollar key", "{\"\\u0024x\":1}", STELE_EDOLLARKEY, "u0024x"},
    {"reserved _id", "{\"_id\":1,\"a\":2}", STELE_ERESERVEDKEY, "\"_id\""},
    {"reserved _stele", "{\"a\":1,\"_stele\":{}}", STELE_ERESERVEDKEY, "\"_stele\""},
    {"reserved _ts", "{\"a\":1,\"_ts\":\"2026\"}", STELE_ERESERVEDKEY, "\"_ts\""},
    {"nested too deeply", "{\"a\":[[[[[[[[[[1]]]]]]]]]]}", STELE_EDEPTH, "deeper than 10"},
    {"exponent overflow", "{\"n\":1e400}", STELE_ENUMBER, "1e400"},
    {"negative exponent overflow", "{\"n\":-1e400}", STELE_ENUMBER, "-1e400"},
    {"exponent underflow", "{\"n\":1e-400}", STELE_ENUMBER, "double"},
    {"twenty-digit integer", "{\"n\":99999999999999999999}", STELE_ENUMBER, "int64"},
    {"int64 max plus one", "{\"n\":9223372036854775808}", STELE_ENUMBER, "int64"},
    {"int64 min minus one", "{\"n\":-9223372036854775809}", STELE_ENUMBER, "int64"},
    {"repeated key", "{\"actor\":\"alice\",\"actor\":\"mallory\"}", STELE_EAMBIGUOUS,
     "duplicate key \"actor\" at actor"},
    {"repeated key at depth 4", "{\"a\":{\"b\":[1,{\"c\":1,\"d\":2,\"c\":3}]}}", STELE_EAMBIGUOUS,
     "duplicate key \"c\" at a.b.1.c"},
    {"repeated key written with an escape", "{\"ab\":1,\"a\\u0062\":2}", STELE_EAMBIGUOUS,
     "duplicate key \"ab\""},
    {"repeated empty key", "{\"\":1,\"\":2}", STELE_EAMBIGUOUS, "duplicate key \"\""},
    {"dotted key", "{\"a.b\":1}", STELE_EAMBIGUOUS, "key \"a.b\" contains '.'"},
    {"dotted key in an array", "{\"x\":[{\"a.b\":1}]}", STELE_EAMBIGUOUS,
     "key \"a.b\" under x.0 contains '.'"},
    {"key that is one dot", "{\"k\":{\".\":1}}", STELE_EAMBIGUOUS, "key \".\" under k"},
    {"dot written as an escape", "{\"a\\u002eb\":1}", STELE_EAMBIGUOUS, "\"a.b\" contains '.'"},
    {"surrogate half then a letter", "{\"a\":\"\\ud800x\\udc00\"}", STELE_EUTF8, "surrogate half"},
    {"low surrogate alone", "{\"a\":\"\\udc00\"}", STELE_EUTF8, "surrogate half"},
    {"overlong NUL in a string", "{\"a\":\"\xc0\x80\"}", STELE_EUTF8, "string at byte 5"},
    {"encoded surrogate in a key", "{\"\xed\xa0\x80\":1}", STELE_EUTF8, "key at byte 1"},
    {"lone n", "{\"a\":n}", STELE_EJSON, "'n' is not json"},
    {"lower-case nan", "{\"a\":[nan]}", STELE_EJSON, "NaN"},
    {"minus Infinity", "{\"a\":-Infinity}", STELE_EJSON, "malformed number"},
    {"exponent without digits", "{\"a\":999e.5}", STELE_EJSON, "malformed number"},
    {"fraction without digits", "{\"a\":1.}", STELE_EJSON, "malformed number"},
    {"control character in a string", "{\"a\":\"x\ty\"}", STELE_EJSON, "control character"},
    {"control character libbson lets through", "{\"a\":\"x\x1ay\"}", STELE_EJSON,
     "byte 7: a control character in the string"},
    {"invalid escape", "{\"a\":\"\\q\"}", STELE_EJSON, "invalid escape"},
    {"short unicode escape", "{\"a\":\"\\u12\"}", STELE_EJSON, "four hex digits"},
    {"trailing comma", "{\"a\":1,}", STELE_EJSON, "byte 7: a key (a string) expected"},
    {"repeated key among twenty",
     "{\"k0\":0,\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,\"k9\":9,"
     "\"k10\":10,\"k11\":11,\"k12\":12,\"k13\":13,\"k14\":14,\"k15\":15,\"k16\":16,\"k17\":17,"
     "\"k18\":18,\"k19\":19,\"k7\":0}",
     STELE_EAMBIGUOUS, "duplicate key \"k7\" at k7"},
    {"dollar key without a colon", "{\"$a\" 1}", STELE_EDOLLARKEY, "\"$a\" at byte 1"},
    {"NUL key without a colon", "{\"\\u0000\" 1}", STELE_EKEYNUL, "byte 1"},
    {"dollar key after broken json", "{\"a\":[1 2],\"$b\":1}", STELE_EDOLLARKEY, "\"$b\""},
};

static const char *const json_good[] = {
    "{\"k0\":0,\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,\"k9\":9,"
    "\"k10\":10,\"k11\":11,\"k12\":12,\"k13\":13,\"k14\":14,\"k15\":15,\"k16\":16,\"k17\":17,"
    "\"k18\":18,\"k19\":19}",
    "{\"actor\":\"alice\",\"action\":\"login\",\"ok\":true}",
    "  {\"a\":1}  \n",
    "{\"n\":9223372036854775807,\"m\":-9223372036854775808,\"d\":1.5e300}",
    "{\"nested\":{\"_id\":1,\"_stele\":2}}",
    "{\"a_b\":1,\"\":2,\"price$\":3}",
    "{\"a\":{\"k\":1},\"b\":{\"k\":2},\"c\":[{\"k\":1},{\"k\":2}],\"k\":0}",
    "{\"k\":1,\"K\":2,\"k \":3,\"caf\xc3\xa9\":4,\"cafe\\u0301\":5}",
    "{\"s\":\"x\\u0000y\",\"u\":\"caf\xc3\xa9 \\u00e9\"}",
    "{\"a\":[[[[[[[[1]]]]]]]]}",
    "{\"z\":0.000001,\"e\":1E5,\"neg\":-0}",
};

#endif /* STELE_TEST_VALIDATE_CASES_H */
