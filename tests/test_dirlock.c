/* Check suite for exec/store/dirlock.h: one run to a directory. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

#include "dirlock.h"
#include "testutil.h"

/* A directory is held by one run: a second lock is refused naming the holder's program and
 * pid and the option that named it (two locks in one process conflict too), and taken once
 * the holder releases it or is killed (SIGKILL); a path that cannot be a directory is one
 * error. */
START_TEST(dir_is_locked)
{
    char top[] = "/tmp/fuyou-dirlock-XXXXXX", dir[128], want[512], path[160];
    ck_assert_ptr_nonnull(mkdtemp(top));
    snprintf(dir, sizeof dir, "%s/run", top); /* missing: created */
    DirLock a = {0}, b = {0};
    Err e;
    ck_assert_msg(dirlock_take(dir, "--save", &a, &e) == 0, "%s", e.msg);
    ck_assert(a.held);
    ck_assert_int_eq(dirlock_take(dir, "--ssd-dir", &b, &e), -EBUSY);
    ck_assert(!b.held);
    snprintf(want, sizeof want, "%s: in use by %s pid %d (lock %s/.lock); wait for it to end "
             "or pick another --ssd-dir directory", dir, program_invocation_short_name,
             (int)getpid(), dir);
    tu_assert_contains(e.msg, want);
    dirlock_release(&a);
    ck_assert(!a.held);
    dirlock_release(&a); /* none held: nothing */
    ck_assert_msg(dirlock_take(dir, "--save", &b, &e) == 0, "%s", e.msg);
    dirlock_release(&b);
    /* a holder killed: its lock goes with it */
    int ready[2], st;
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        DirLock c = {0};
        char ok = dirlock_take(dir, "--save", &c, &e) == 0 ? 'y' : 'n';
        if (write(ready[1], &ok, 1) == 1)
            pause();
        _exit(1);
    }
    char ok = 0;
    ck_assert_int_eq(read(ready[0], &ok, 1), 1);
    ck_assert_int_eq(ok, 'y');
    ck_assert_int_eq(dirlock_take(dir, "--save", &b, &e), -EBUSY);
    snprintf(want, sizeof want, "pid %d (lock", (int)pid);
    tu_assert_contains(e.msg, want);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    close(ready[0]), close(ready[1]);
    ck_assert_msg(dirlock_take(dir, "--save", &b, &e) == 0, "%s", e.msg);
    dirlock_release(&b);
    /* a file, and a directory whose parent is missing */
    snprintf(path, sizeof path, "%s/notes.txt", top);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(dirlock_take(path, "--save", &b, &e), -ENOTDIR);
    tu_assert_contains(e.msg, "notes.txt/.lock");
    snprintf(path, sizeof path, "%s/no/run", top);
    ck_assert_int_eq(dirlock_take(path, "--save", &b, &e), -ENOENT);
    tu_assert_contains(e.msg, path);
    ck_assert(!b.held);
    tu_rm_tree(top);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dirlock");
    TCase *tc = tcase_create("dirlock");
    tcase_add_test(tc, dir_is_locked);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
