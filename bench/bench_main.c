/*
 * bench_main.c: stele-bench's command line: parses the flags into a plan of cells (one cell,
 * a cartesian product of comma-separated lists, --quick, or --sweep), makes the run's own
 * temporary directory under --dir (default: the current directory, so the disk measured is
 * the one the user stands on), runs the plan and removes everything it created.
 *
 * Exit codes: 0 every cell ran or was skipped with a reason; 1 usage, or a --table or
 * --plot-from file that cannot be read (or plotted); 3 a cell failed; 130 interrupted
 * (SIGINT/SIGTERM/SIGHUP), after the same cleanup.
 */
#include "bench.h"
#include "bench_cli.h"
#include "bench_peers.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

/* Signals are blocked in every thread and taken here, so an interrupted sweep still stops
 * its servers, unmounts the emulated disk and removes its directory. */
typedef struct main_signals {
    sigset_t set;
    atomic_int interrupted;
    pthread_t thread;
} main_signals_t;

static void *
main_signal_thread(void *arg)
{
    main_signals_t *s = arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&s->set, &sig) == 0) {
            atomic_store(&s->interrupted, 1);
            fprintf(stderr, "\nstele-bench: interrupted, cleaning up\n");
        }
    }
    return NULL;
}

static int
main_block_signals(main_signals_t *s)
{
    sigemptyset(&s->set);
    sigaddset(&s->set, SIGINT);
    sigaddset(&s->set, SIGTERM);
    sigaddset(&s->set, SIGHUP);
    atomic_init(&s->interrupted, 0);
    if (pthread_sigmask(SIG_BLOCK, &s->set, NULL) != 0 ||
        pthread_create(&s->thread, NULL, main_signal_thread, s) != 0)
        return -1;
    return 0;
}

/* sigwait is a cancellation point: the thread ends before main's frame (and *s) does. */
static void
main_stop_signal_thread(main_signals_t *s)
{
    pthread_cancel(s->thread);
    pthread_join(s->thread, NULL);
}

static int
main_setup_hdd(const bench_cli_t *cli, const bench_plan_t *plan, bench_hdd_t **hdd,
               const char *run_dir)
{
    int needs_hdd = 0;
    for (size_t i = 0; i < plan->n; i++)
        needs_hdd |= strcmp(plan->cells[i].device, "hdd-emulated") == 0;
    if (!needs_hdd)
        return 0;
    char note[BENCH_NOTE_BYTES];
    int rc = bench_hdd_mount(run_dir, &cli->hdd_model, hdd, note, sizeof note);
    if (rc)
        fprintf(stderr, "stele-bench: emulated HDD skipped: %s\n", note);
    return 0;
}

static int
main_write_outputs(const bench_cli_t *cli, bench_run_opts_t *o, FILE **csv, FILE **jsonl)
{
    if (!cli->out_dir)
        return 0;
    /* The directory itself is made if missing (not its parents: a mistyped parent is more
     * likely a mistake than a wish). */
    if (mkdir(cli->out_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "stele-bench: could not create --out %s: %s\n", cli->out_dir,
                strerror(errno));
        return -1;
    }
    char path[BENCH_PATH_BYTES];
    snprintf(path, sizeof path, "%s/results.csv", cli->out_dir);
    *csv = fopen(path, "w");
    snprintf(path, sizeof path, "%s/results.jsonl", cli->out_dir);
    *jsonl = fopen(path, "w");
    if (!*csv || !*jsonl) {
        fprintf(stderr, "stele-bench: could not write into %s: %s\n", cli->out_dir,
                strerror(errno));
        return -1;
    }
    bench_print_csv_header(*csv);
    o->csv = *csv;
    o->jsonl = *jsonl;
    o->cdf_dir = cli->out_dir;
    return 0;
}

static int
main_run(const bench_cli_t *cli, bench_plan_t *plan, main_signals_t *sig)
{
    char run_dir[BENCH_PATH_BYTES];
    int rc = bench_make_temp_dir(cli->dir, "stele-bench", run_dir, sizeof run_dir);
    if (rc) {
        fprintf(stderr, "stele-bench: could not create a directory in %s: %s\n", cli->dir,
                strerror(-rc));
        return 3;
    }
    /* Traversable (not listable) by others: PostgreSQL runs as its own user beneath it. */
    chmod(run_dir, 0711);
    bench_hdd_t *hdd = NULL;
    main_setup_hdd(cli, plan, &hdd, run_dir);
    bench_run_opts_t o = {.run_dir = run_dir,
                          .hdd_dir = bench_hdd_path(hdd),
                          .json = cli->json,
                          .quiet_progress = cli->quiet,
                          .interrupted = &sig->interrupted};
    FILE *csv = NULL, *jsonl = NULL;
    bench_result_t *res = NULL;
    int exit_code = main_write_outputs(cli, &o, &csv, &jsonl) ? 3 : 0;
    if (exit_code == 0 && bench_plan_run(plan, &o, &res) != 0)
        exit_code = 3;
    for (size_t i = 0; res && i < plan->n; i++)
        if (res[i].status == BENCH_FAILED)
            exit_code = 3;
    if (csv)
        fclose(csv);
    if (jsonl)
        fclose(jsonl);
    if (res && cli->out_dir && cli->plot)
        bench_plot(cli->out_dir, res, plan->n, NULL);
    /* One summary per repetition: its ratios are between cells run side by side. */
    size_t per_rep = plan->n / cli->repeat;
    for (uint32_t rep = 0; res && !cli->json && per_rep > 1 && rep < cli->repeat; rep++) {
        if (cli->repeat > 1)
            printf("\nrepetition %u of %u:", rep + 1, cli->repeat);
        bench_print_summary(stdout, res + rep * per_rep, per_rep);
    }
    if (res && !cli->json && cli->repeat > 1)
        bench_print_repeat_summary(stdout, res, per_rep, cli->repeat);
    for (size_t i = 0; res && i < plan->n; i++)
        bench_result_release(&res[i]);
    free(res);
    bench_hdd_unmount(hdd);
    bench_server_stop_all(); /* a hung cell's server, never closed */
    if (!cli->keep)
        bench_remove_tree(run_dir);
    else
        fprintf(stderr, "stele-bench: data kept in %s\n", run_dir);
    return atomic_load(&sig->interrupted) ? 130 : exit_code;
}

int
main(int argc, char **argv)
{
    stele_forget_driver_counters(); /* a killed run leaves no /dev/shm/mongoc-PID behind */
    bench_cli_t cli;
    int rc = bench_cli_parse(&cli, argc, argv);
    if (rc)
        return rc < 0 ? 0 : 1; /* -1: --help printed */
    if (cli.table_csv)
        return bench_table_print(cli.table_csv, stdout) ? 1 : 0;
    if (cli.plot_from_csv)
        return bench_plot_from_csv(cli.plot_from_csv, cli.out_dir) ? 1 : 0;
    main_signals_t sig;
    if (main_block_signals(&sig)) {
        fprintf(stderr, "stele-bench: could not set up signal handling\n");
        return 3;
    }
    if (cli.probe_dir) {
        /* Under the same signal thread as a plan, so an interrupt still removes its file. */
        rc = bench_probe(cli.probe_dir, cli.seconds_given ? cli.seconds : 60.0, &sig.interrupted);
        main_stop_signal_thread(&sig);
        return rc == -EINTR ? 130 : rc ? 3 : 0;
    }
    bench_plan_t plan = {0};
    int exit_code = 3;
    if (bench_cli_build_plan(&cli, &plan) == 0)
        exit_code = main_run(&cli, &plan, &sig);
    else
        fprintf(stderr, "stele-bench: out of memory\n");
    bench_plan_free(&plan);
    main_stop_signal_thread(&sig);
    return exit_code;
}
