/*
 * The kernel's floor under pgherald's fan-out, measured on this machine:
 * what it costs to write one event frame to a Unix stream socket, and to
 * wake a reader blocked in epoll_wait to read it, with nothing else done.
 *
 *   cc -O2 -o floor bench/floor.c && ./floor [SOCKETS] [EVENTS_PER_SECOND] [SECONDS] [FRAME_BYTES]
 *
 * One writer process writes each event's frame to every socket, at a fixed
 * rate, as the daemon writes one event to each stream; one reader process
 * waits in epoll_wait on all the sockets and reads what arrives, as the
 * benchmark's epoll client does. Prints one JSON line: CPU per write and
 * per read (user and system, from getrusage), and the writes done.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(struct timeval value) { return value.tv_sec + value.tv_usec / 1e6; }

static double now(void) {
    struct timespec spec;
    clock_gettime(CLOCK_MONOTONIC, &spec);
    return spec.tv_sec + spec.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    int sockets = argc > 1 ? atoi(argv[1]) : 100;
    int rate = argc > 2 ? atoi(argv[2]) : 1000;
    double duration = argc > 3 ? atof(argv[3]) : 5;
    int frame = argc > 4 ? atoi(argv[4]) : 300;
    if (sockets < 1 || rate < 1 || duration <= 0 || frame < 1) {
        fprintf(stderr, "usage: floor [SOCKETS] [EVENTS_PER_SECOND] [SECONDS] [FRAME_BYTES]\n");
        return 64;
    }
    int (*pairs)[2] = calloc(sockets, sizeof *pairs);
    for (int index = 0; index < sockets; index++) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, pairs[index]) != 0) { perror("socketpair"); return 1; }
    }
    int report[2];
    if (pipe(report) != 0) { perror("pipe"); return 1; }
    pid_t reader = fork();
    if (reader == 0) {
        int poll = epoll_create1(0);
        for (int index = 0; index < sockets; index++) {
            close(pairs[index][0]);
            struct epoll_event event = { .events = EPOLLIN, .data.fd = pairs[index][1] };
            epoll_ctl(poll, EPOLL_CTL_ADD, pairs[index][1], &event);
        }
        char buffer[65536];
        long reads = 0, open = sockets;
        struct epoll_event ready[256];
        while (open > 0) {
            int count = epoll_wait(poll, ready, 256, -1);
            for (int index = 0; index < count; index++) {
                ssize_t got = read(ready[index].data.fd, buffer, sizeof buffer);
                if (got > 0) {
                    reads++;
                } else {
                    epoll_ctl(poll, EPOLL_CTL_DEL, ready[index].data.fd, NULL);
                    close(ready[index].data.fd);
                    open--;
                }
            }
        }
        struct rusage usage;
        getrusage(RUSAGE_SELF, &usage);
        double cpu[3] = { seconds(usage.ru_utime), seconds(usage.ru_stime), (double)reads };
        write(report[1], cpu, sizeof cpu);
        _exit(0);
    }
    for (int index = 0; index < sockets; index++) close(pairs[index][1]);
    char *bytes = malloc(frame);
    memset(bytes, 'x', frame);
    bytes[frame - 1] = '\n';
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    long events = (long)(rate * duration), writes = 0;
    double start = now();
    for (long event = 0; event < events; event++) {
        double due = start + (double)event / rate;
        double wait = due - now();
        if (wait > 0) {
            struct timespec pause = { (time_t)wait, (long)((wait - (time_t)wait) * 1e9) };
            nanosleep(&pause, NULL);
        }
        for (int index = 0; index < sockets; index++) {
            if (write(pairs[index][0], bytes, frame) == frame) writes++;
        }
    }
    double elapsed = now() - start;
    getrusage(RUSAGE_SELF, &after);
    for (int index = 0; index < sockets; index++) close(pairs[index][0]);
    double cpu[3];
    read(report[0], cpu, sizeof cpu);
    waitpid(reader, NULL, 0);
    double writerUser = seconds(after.ru_utime) - seconds(before.ru_utime);
    double writerSystem = seconds(after.ru_stime) - seconds(before.ru_stime);
    printf("{\"sockets\":%d,\"eventsPerSecond\":%d,\"seconds\":%.2f,\"frameBytes\":%d,\"writes\":%ld,\"reads\":%.0f,"
           "\"writerMicrosecondsPerWrite\":%.3f,\"writerSystemShare\":%.2f,\"readerMicrosecondsPerWrite\":%.3f,\"readerMicrosecondsPerRead\":%.3f}\n",
           sockets, rate, elapsed, frame, writes, cpu[2],
           (writerUser + writerSystem) * 1e6 / writes, writerSystem / (writerUser + writerSystem + 1e-12),
           (cpu[0] + cpu[1]) * 1e6 / writes, (cpu[0] + cpu[1]) * 1e6 / (cpu[2] > 0 ? cpu[2] : 1));
    return 0;
}
