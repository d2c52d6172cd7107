/* The header check: every public header is compiled alone into this test (header_check.c.in);
 * if one does not compile, neither does this. Running it just reports how many were checked. */
#include <stdio.h>

int main(void)
{
    printf("%d public headers compile on their own\n", HEADER_COUNT);
    return HEADER_COUNT > 0 ? 0 : 1;
}
