// The floor of a user-space hard CBS on this machine (issue 14): the CPU time of the
// wake-ups alone, with nothing done in them, in the pattern the daemon needs per server period
// with the BPF sensor and quiet stops:
//   - a loop thread (SCHED_FIFO 98, on the server's CPU) woken by a timer at each
//     replenishment, which kicks the other CPU's backstop through an eventfd (the watch copy's
//     re-arm, docs/runtime.md);
//   - the server CPU's backstop (SCHED_FIFO 97, same CPU), woken by its timer at the
//     exhaustion, Q after the replenishment;
//   - the other CPU's backstop (SCHED_FIFO 97), woken by the kick.
// A busy thread (SCHED_OTHER) runs on the server's CPU meanwhile, as the member would.
// With FREEZE (a v2 cgroup's `cgroup.freeze`, holding a busy process the caller started on CPU)
// the wake-ups also do the work no user-space hard CBS can leave out: the loop thaws the member
// at each replenishment, the backstop freezes it at each exhaustion (one write each).
// With MEMBER and MIGRATE (`quiet` or `loop`), the pattern of a global box on both CPUs with one
// busy member (the sleepers' box of experiments/daemon-cpu.sh): a server of Q/P on each CPU,
// the second's period starting Q after the first's, as the CBS starts it when the member first
// lands there. The member runs Q on CPU, then Q on OTHER_CPU, then waits for the next period:
//   - the loop, at each replenishment of the first server, moves the member back to CPU
//     (sched_setaffinity), thaws it and kicks the other CPU's backstop;
//   - `quiet`: the first CPU's backstop, at its exhaustion, moves the member to OTHER_CPU
//     itself (one sched_setaffinity, no freeze: the move is the stop), waking nobody;
//     `loop`: it freezes the member and wakes the loop, which moves and thaws it (what the
//     daemon does now);
//   - the other CPU's backstop, at the second exhaustion, freezes it.
// Prints the three threads' CPU time per second (schedstat) and per wake-up.
// usage: wake-floor PERIOD_US BUDGET_US SECONDS [CPU OTHER_CPU [FREEZE [MEMBER MIGRATE]]]
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static long period_ns, budget_ns, seconds;
static int cpu, other_cpu;
static int kick_fd;
// The member's cgroup.freeze, or -1 (no freezing, a busy thread of our own instead).
static int freeze_fd = -1;
// The member's pid and the migrating pattern: 0 none, 1 quiet, 2 by the loop.
static pid_t member;
static int migrate;
// The first CPU's backstop wakes the loop through this (`loop` migration).
static int wake_fd;

static void move_member(int c) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c, &set);
    if (sched_setaffinity(member, sizeof set, &set) != 0) {
        perror("wake-floor: sched_setaffinity of the member");
        exit(1);
    }
}

static void set_frozen(const char *v) {
    if (freeze_fd >= 0 && pwrite(freeze_fd, v, 1, 0) < 0) {
        perror("wake-floor: cgroup.freeze");
        exit(1);
    }
}
static volatile int stop;
static struct timespec start;
// Each thread's own CPU time (ns), read by itself just before it ends.
static double spent[3];

static double own_cpu(void);

static void pin(int c, int prio) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (prio) {
        struct sched_param p = {.sched_priority = prio};
        if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) != 0) {
            fprintf(stderr, "wake-floor: SCHED_FIFO needs root\n");
            exit(2);
        }
    }
}

static struct timespec at(long ns) {
    struct timespec t = start;
    long long total = (long long)t.tv_nsec + ns;
    t.tv_sec += total / 1000000000LL;
    t.tv_nsec = total % 1000000000LL;
    return t;
}

static void sleep_on_timer(int tfd, struct timespec t) {
    struct itimerspec its = {.it_value = t};
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
    struct pollfd pf = {.fd = tfd, .events = POLLIN};
    ppoll(&pf, 1, NULL, NULL);
    uint64_t x;
    if (read(tfd, &x, 8) < 0) {
    }
}

// The loop's sleep until `t` or, with `loop` migration, the backstop's wake-up, which it
// answers by moving the member to the other CPU and thawing it.
static void loop_sleep(int tfd, struct timespec t) {
    struct itimerspec its = {.it_value = t};
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
    for (;;) {
        struct pollfd pf[2] = {{.fd = tfd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
        ppoll(pf, migrate == 2 ? 2 : 1, NULL, NULL);
        uint64_t x;
        if (pf[0].revents) {
            if (read(tfd, &x, 8) < 0) {
            }
            return;
        }
        if (read(wake_fd, &x, 8) < 0) {
        }
        move_member(other_cpu);
        set_frozen("0");
    }
}

static void *loop_thread(void *arg) {
    (void)arg;
    pin(cpu, 98);
    int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    for (long k = 1; k <= seconds * 1000000000L / period_ns; k++) {
        loop_sleep(tfd, at(k * period_ns));
        if (migrate)
            move_member(cpu);
        set_frozen("0");
        uint64_t one = 1;
        if (write(kick_fd, &one, 8) < 0) {
        }
    }
    spent[0] = own_cpu();
    stop = 1;
    uint64_t one = 1;
    if (write(kick_fd, &one, 8) < 0) {
    }
    return NULL;
}

static void *stop_thread(void *arg) {
    (void)arg;
    pin(cpu, 97);
    int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    for (long k = 1; !stop && k <= seconds * 1000000000L / period_ns; k++) {
        sleep_on_timer(tfd, at(k * period_ns + budget_ns));
        if (migrate == 1) {
            move_member(other_cpu);
        } else {
            set_frozen("1");
            if (migrate == 2) {
                uint64_t one = 1;
                if (write(wake_fd, &one, 8) < 0) {
                }
            }
        }
    }
    set_frozen("0");
    spent[1] = own_cpu();
    return NULL;
}

static void *watch_thread(void *arg) {
    (void)arg;
    pin(other_cpu, 97);
    // Migrating: the second server's exhaustion, 2 Q after the first's replenishment.
    int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    long k = 1;
    if (migrate) {
        struct itimerspec its = {.it_value = at(period_ns + 2 * budget_ns)};
        timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
    }
    while (!stop) {
        struct pollfd pf[2] = {{.fd = kick_fd, .events = POLLIN}, {.fd = tfd, .events = POLLIN}};
        ppoll(pf, migrate ? 2 : 1, NULL, NULL);
        uint64_t x;
        if (pf[0].revents && read(kick_fd, &x, 8) < 0) {
        }
        if (migrate && pf[1].revents) {
            if (read(tfd, &x, 8) < 0) {
            }
            set_frozen("1");
            k++;
            struct itimerspec its = {.it_value = at(k * period_ns + 2 * budget_ns)};
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
        }
    }
    spent[2] = own_cpu();
    return NULL;
}

static void *busy_thread(void *arg) {
    (void)arg;
    pin(cpu, 0);
    while (!stop) {
    }
    return NULL;
}

static double own_cpu(void) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    double ns = 0;
    if (f) {
        if (fscanf(f, "%lf", &ns) != 1)
            ns = 0;
        fclose(f);
    }
    return ns;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: wake-floor PERIOD_US BUDGET_US SECONDS [CPU OTHER_CPU [FREEZE "
                        "[MEMBER quiet|loop]]]\n");
        return 2;
    }
    period_ns = atol(argv[1]) * 1000;
    budget_ns = atol(argv[2]) * 1000;
    seconds = atol(argv[3]);
    cpu = argc > 4 ? atoi(argv[4]) : 0;
    other_cpu = argc > 5 ? atoi(argv[5]) : 1;
    if (argc > 6 && (freeze_fd = open(argv[6], O_WRONLY)) < 0) {
        perror("wake-floor: open FREEZE");
        return 2;
    }
    if (argc > 8) {
        member = atoi(argv[7]);
        migrate = strcmp(argv[8], "quiet") == 0 ? 1 : strcmp(argv[8], "loop") == 0 ? 2 : 0;
        if (member <= 0 || !migrate || freeze_fd < 0) {
            fprintf(stderr, "wake-floor: MIGRATE needs FREEZE, a MEMBER pid and quiet|loop\n");
            return 2;
        }
    }
    if (migrate && 2 * atol(argv[2]) >= atol(argv[1])) {
        fprintf(stderr, "wake-floor: migrating needs 2 BUDGET_US < PERIOD_US\n");
        return 2;
    }
    if (period_ns <= 0 || budget_ns <= 0 || budget_ns >= period_ns || seconds <= 0) {
        fprintf(stderr, "wake-floor: need 0 < BUDGET_US < PERIOD_US and SECONDS > 0\n");
        return 2;
    }
    kick_fd = eventfd(0, 0);
    wake_fd = eventfd(0, 0);
    clock_gettime(CLOCK_MONOTONIC, &start);
    start = at(100000000L);
    pthread_t t[4];
    if (freeze_fd < 0)
        pthread_create(&t[3], NULL, busy_thread, NULL);
    pthread_create(&t[2], NULL, watch_thread, NULL);
    pthread_create(&t[1], NULL, stop_thread, NULL);
    pthread_create(&t[0], NULL, loop_thread, NULL);
    for (int i = 0; i < (freeze_fd < 0 ? 4 : 3); i++)
        pthread_join(t[i], NULL);
    double loop_ns = spent[0], stop_ns = spent[1], watch_ns = spent[2];
    long periods = seconds * 1000000000L / period_ns;
    // Per period: the loop, the backstop, the kick; migrating, the second exhaustion too, and
    // by the loop, the loop's second wake-up.
    int wakes = 3 + (migrate > 0) + (migrate == 2);
    double total = loop_ns + stop_ns + watch_ns;
    printf("%ld us / %ld us%s: %ld periods; CPU per second: loop %.4f, backstop %.4f, other CPU "
           "%.4f, total %.4f; per period %.1f us (%.1f us per wake-up)\n",
           budget_ns / 1000, period_ns / 1000,
           migrate == 1   ? ", migrating quietly"
           : migrate == 2 ? ", migrating by the loop"
           : freeze_fd < 0 ? ""
                           : ", freezing",
           periods,
           loop_ns / seconds / 1e9, stop_ns / seconds / 1e9, watch_ns / seconds / 1e9,
           total / seconds / 1e9, total / periods / 1e3, total / periods / wakes / 1e3);
    return 0;
}
