/* Check suite for model/regfile: opening inputs that must be regular files, refusing
 * directories, FIFOs, devices and sockets without blocking on them; output paths checked
 * before work. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "regfile.h"
#include "testutil.h"

START_TEST(regular_file_opens)
{
    char path[64];
    tu_temp_file(path, sizeof path, ".txt", "hello\n");
    Err e;
    int fd = regfile_open(path, &e);
    ck_assert_msg(fd >= 0, "%s", e.msg);
    char buf[16];
    ck_assert_int_eq(read(fd, buf, sizeof buf), 6);
    /* blocking again, as an ordinary open gives it */
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    close(fd);
    FILE *f = NULL;
    ck_assert_int_eq(regfile_fopen(path, &f, &e), 0);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
    ck_assert_str_eq(buf, "hello\n");
    fclose(f);
    ck_assert_int_eq(regfile_check(path, &e), 0);
    unlink(path);
}
END_TEST

START_TEST(others_refused)
{
    Err e;
    FILE *f = (FILE *)1;
    ck_assert_int_eq(regfile_open("/nonexistent/dir/x", &e), -ENOENT);
    tu_assert_contains(e.msg, "/nonexistent/dir/x: cannot read: ");
    ck_assert_int_eq(regfile_open("/tmp", &e), -EISDIR);
    tu_assert_contains(e.msg, "/tmp: is a directory, not a regular file");
    ck_assert_int_eq(regfile_fopen("/dev/zero", &f, &e), -EINVAL);
    ck_assert_ptr_null(f);
    tu_assert_contains(e.msg, "/dev/zero: is a character device, not a regular file");
    ck_assert_int_eq(regfile_check("/dev/null", &e), -EINVAL);
    tu_assert_contains(e.msg, "/dev/null: is a character device");
    char dir[] = "/tmp/fuyou-regfile-XXXXXX", fifo[64], sock[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    alarm(10); /* a blocking open fails the test instead of hanging it */
    ck_assert_int_eq(regfile_open(fifo, &e), -EINVAL);
    ck_assert_int_eq(regfile_fopen(fifo, &f, &e), -EINVAL);
    alarm(0);
    tu_assert_contains(e.msg, "/fifo: is a FIFO (named pipe), not a regular file");
    snprintf(sock, sizeof sock, "%s/sock", dir);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(regfile_check(sock, &e), -EINVAL);
    tu_assert_contains(e.msg, "/sock: is a socket");
    close(s);
    unlink(sock);
    unlink(fifo);
    rmdir(dir);
}
END_TEST

START_TEST(output_paths_checked)
{
    Err e;
    char dir[] = "/tmp/fuyou-outpath-XXXXXX", file[64], missing[64], under_file[80], sub[80];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/log.tsv", dir);
    snprintf(missing, sizeof missing, "%s/new", dir);
    snprintf(under_file, sizeof under_file, "%s/x", file);
    snprintf(sub, sizeof sub, "%s/no/such", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    /* what can be written: an existing file or directory of the kind, or a new one in a
     * directory that exists */
    ck_assert_int_eq(outpath_check(file, false, &e), 0);
    ck_assert_int_eq(outpath_check(dir, true, &e), 0);
    ck_assert_int_eq(outpath_check(missing, false, &e), 0);
    ck_assert_int_eq(outpath_check(missing, true, &e), 0);
    ck_assert_int_eq(access(missing, F_OK), -1); /* nothing created */
    ck_assert_int_eq(outpath_check("relative-new-file", false, &e), 0);
    /* what cannot */
    ck_assert_int_eq(outpath_check(dir, false, &e), -EISDIR);
    tu_assert_contains(e.msg, ": cannot write: is a directory, a file goes here");
    ck_assert_int_eq(outpath_check(file, true, &e), -ENOTDIR);
    tu_assert_contains(e.msg, "/log.tsv: cannot write: not a directory");
    ck_assert_int_eq(outpath_check(sub, true, &e), -ENOENT);
    tu_assert_contains(e.msg, "/no/such: cannot write: ");
    tu_assert_contains(e.msg, "/no: No such file or directory");
    ck_assert_int_eq(outpath_check(under_file, false, &e), -ENOTDIR);
    ck_assert_int_eq(outpath_check("/nonexistent/x", true, &e), -ENOENT);
    unlink(file);
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("regfile");
    TCase *tc = tcase_create("regfile");
    tcase_add_test(tc, regular_file_opens);
    tcase_add_test(tc, others_refused);
    tcase_add_test(tc, output_paths_checked);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
