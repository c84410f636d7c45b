#!/bin/sh
# Entry point of the fcm-mock image. For `serve` with a database file (FCM_MOCK_DB, no --db on the
# command line) it checks that the file's directory is writable by the user the container runs as
# and, if not, says how to fix it instead of leaving SQLite's "unable to open database file".
# Then it execs fcm-mock, which becomes PID 1 and receives `docker stop`'s SIGTERM itself.
#
# docker/check-dockerfile.sh runs this script (as uid 10001 when it can) in `make test`.
set -eu

if [ "${1:-}" = serve ]; then
    db=${FCM_MOCK_DB:-}
    for arg in "$@"; do
        case $arg in --db | --db=*) db= ;; esac
    done
    case $db in
    '' | :memory:) ;;
    *)
        dir=$(dirname -- "$db")
        if [ -d "$dir" ] && { [ ! -w "$dir" ] || [ ! -x "$dir" ] || { [ -e "$db" ] && [ ! -w "$db" ]; }; }; then
            owner=$(stat -c %u:%g -- "$dir" 2>/dev/null || echo '?')
            echo "fcm-mock: cannot write $db: $dir belongs to uid:gid $owner and this container" \
                 "runs as $(id -u):$(id -g). Either run as the directory's owner" \
                 "(docker run --user \"\$(id -u):\$(id -g)\" for a bind mount of your own directory;" \
                 "compose: user: \"UID:GID\"), or give it to the image's user on the host" \
                 "(sudo chown -R 10001:10001 ./data), or use FCM_MOCK_DB=:memory: for a throwaway run." >&2
            exit 1
        fi
        ;;
    esac
fi

exec fcm-mock "$@"
