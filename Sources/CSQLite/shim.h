#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import.
static inline sqlite3_destructor_type fcm_sqlite_transient(void) { return SQLITE_TRANSIENT; }

// sqlite3_config is variadic. Turning memory statistics off spares every SQLite allocation a
// global mutex and two counter updates; it only takes effect before SQLite initializes.
static inline int fcm_sqlite_disable_memstatus(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }
