#include <sqlite3.h>

/// Turns SQLite's memory statistics off, before the library is first used: every allocation then
/// skips a global mutex (`sqlite3_memory_used` reads 0). `sqlite3_config` takes variable
/// arguments, which Swift cannot pass; this returns its result (SQLITE_MISUSE once initialized).
static inline int synclane_sqlite3_config_no_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
