/* Check suite for model/regfile: opening inputs that must be regular files, refusing
 * directories, FIFOs, devices and sockets without blocking on them. */
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

int main(void)
{
    Suite *s = suite_create("regfile");
    TCase *tc = tcase_create("regfile");
    tcase_add_test(tc, regular_file_opens);
    tcase_add_test(tc, others_refused);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
