/* Runs a command and prints its wall time, CPU time and peak RSS, for the
 * benchmark scripts (bench/sim-vs-ns3, bench/many-flows).
 *
 *   measure OUTFILE COMMAND [ARG...]
 *
 * Writes "wall_s cpu_s maxrss_kib exit_code" to OUTFILE: wall from the
 * monotonic clock, CPU (user + system) and peak RSS from wait4, all to the
 * microsecond. The command's stdin, stdout and stderr are this program's.
 *
 * Why not measure from the Python script itself: a child that Python
 * starts with vfork and exec records the Python interpreter's own peak
 * RSS as its first image's, and the kernel reports the largest of a
 * process's images, so the measured command would be charged the
 * interpreter's 10-20 MiB. Here the command is forked from this small
 * program, whose memory is what its first image brings. /usr/bin/time
 * does the same but prints CPU time in 10-ms steps.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: measure OUTFILE COMMAND [ARG...]\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("measure: fork");
        return 2;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror("measure: exec");
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("measure: wait4");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    FILE *f = fopen(argv[1], "w");
    if (f == NULL) {
        perror("measure: output file");
        return 2;
    }
    fprintf(f, "%.6f %.6f %ld %d\n", wall, cpu, ru.ru_maxrss, code);
    fclose(f);
    return code;
}
