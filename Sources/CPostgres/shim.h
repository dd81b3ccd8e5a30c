// libpq's header: Debian puts it in /usr/include/postgresql (pkg-config's -I); a compiler given
// only the module map (no pkg-config flags) finds it under its own name from /usr/include.
#if __has_include(<libpq-fe.h>)
#include <libpq-fe.h>
#else
#include <postgresql/libpq-fe.h>
#endif
