/*
 * test_serve_main.c: a `stele` binary reduced to its `serve` verb, so the serve tests run
 * the daemon as its own process whatever state cli/main.c is in. Same argv as
 * `stele serve ...`: argv[1] is "serve".
 */
#include <stdio.h>
#include <string.h>

#include "serve.h"

int
main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "serve") != 0) {
        fprintf(stderr, "usage: %s serve [options]\n", argv[0]);
        return 1;
    }
    return cmd_serve(argc - 1, argv + 1);
}
