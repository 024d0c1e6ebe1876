#!/bin/sh
# Fill ${NAME} placeholders of an Alertmanager config from the environment and start it.
#   render.sh TEMPLATE OUTPUT [alertmanager args...]
# A receiver whose URL is empty is dropped: without ALERT_SLACK_WEBHOOK_URL, mail only.
# POSIX sh and awk only (the prom/alertmanager image is busybox-based).
set -eu
template=$1
output=$2
shift 2
awk '
    {
        line = $0
        out = ""
        while (match(line, /\$\{[A-Z_][A-Z0-9_]*\}/)) {
            name = substr(line, RSTART + 2, RLENGTH - 3)
            out = out substr(line, 1, RSTART - 1) ENVIRON[name]
            line = substr(line, RSTART + RLENGTH)
        }
        print out line
    }
' "$template" > "$output.all"
if [ -z "${ALERT_SLACK_WEBHOOK_URL:-}" ]; then
    # Drop the slack_configs block (up to the next key at its indentation or less).
    awk '
        /^    slack_configs:/ { skipping = 1; next }
        skipping && /^    [^ ]/ { skipping = 0 }
        skipping && /^  [^ ]/ { skipping = 0 }
        skipping && /^[^ ]/ { skipping = 0 }
        !skipping { print }
    ' "$output.all" > "$output"
else
    cp "$output.all" "$output"
fi
rm -f "$output.all"
if [ "$#" -gt 0 ]; then
    exec "$@"
fi
