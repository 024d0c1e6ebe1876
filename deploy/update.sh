#!/usr/bin/env bash
# Move a docker-compose.prod.yml install to another published image tag, with a way back.
#   deploy/update.sh 1.4.0     # or `latest`, `main`, `sha-abc1234`
# 1. pull the new images (nothing stops if that fails);
# 2. back up the database with the running version (manage.py backup, the backups storage);
# 3. run the new version's migrations (one-shot `migrate`);
# 4. restart one service at a time (web first), each waiting for its healthcheck;
# 5. if a service is not healthy within HEALTH_TIMEOUT seconds (default 180), roll back: the
#    previous tag is written back to .env and every service restarted on it, then exit 1.
# Migrations are not undone by a rollback: they must stay compatible with the previous release
# (docs/deployment.md "Updates"); the backup of step 2 is the way back from one that is not.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 077  # .env and its temporary copy hold secrets

[[ $# -eq 1 ]] || { echo "usage: deploy/update.sh TAG" >&2; exit 2; }
target=$1
compose=(docker compose -f docker-compose.prod.yml)
services=(web worker webhooks jobs scheduler)
health_timeout=${HEALTH_TIMEOUT:-180}

log() { echo "update.sh: $*"; }

current_tag() { awk -F= '$1 == "DESKCOMM_VERSION" { value = $2 } END { print value }' .env; }

set_tag() {
    TAG="$1" awk '
        index($0, "DESKCOMM_VERSION=") == 1 { print "DESKCOMM_VERSION=" ENVIRON["TAG"]; done = 1; next }
        { print }
        END { if (!done) print "DESKCOMM_VERSION=" ENVIRON["TAG"] }
    ' .env > .env.new
    cat .env.new > .env  # keeps .env's mode (600)
    rm .env.new
}

healthy() {  # service: waits for its container's healthcheck, up to health_timeout seconds
    local service=$1 deadline=$((SECONDS + health_timeout)) id status
    while ((SECONDS <= deadline)); do
        id=$("${compose[@]}" ps -q "$service")
        status=$(docker inspect --format '{{.State.Health.Status}}' "$id" 2>/dev/null || echo missing)
        [[ $status == healthy ]] && return 0
        [[ $status == unhealthy ]] && return 1
        sleep 3
    done
    return 1
}

restart_all() {  # one service at a time; fails on the first that is not healthy
    local service
    for service in "${services[@]}"; do
        log "restarting $service"
        "${compose[@]}" up -d --no-deps "$service"
        healthy "$service" || { log "$service is not healthy"; return 1; }
    done
}

[[ -f .env ]] || { echo "update.sh: no .env (run deploy/install.sh first)" >&2; exit 1; }
previous=$(current_tag)
previous=${previous:-latest}
log "from $previous to $target"

DESKCOMM_VERSION=$target "${compose[@]}" pull
log "backing up the database (running version $previous)"
"${compose[@]}" run --rm --no-deps jobs python manage.py backup

set_tag "$target"
if "${compose[@]}" run --rm migrate && restart_all; then
    log "now on $target"
    exit 0
fi

log "rolling back to $previous"
set_tag "$previous"
restart_all || log "the previous version is not healthy either: see docs/runbooks"
exit 1
