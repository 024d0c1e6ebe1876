#!/usr/bin/env bash
# First install of Deskcomm with docker-compose.prod.yml (docs/deployment.md).
#   deploy/install.sh                 # asks for the domain, the operators' e-mail, SMTP and
#                                     # the DPO's e-mail (default: the first operator's)
#   DESKCOMM_DOMAIN=crm.example.com ADMINS=ops@example.com EMAIL_URL=smtp+tls://... \
#     [LGPD_DPO_EMAIL=dpo@example.com] deploy/install.sh --yes   # the same, unattended
#   deploy/install.sh --env-only      # only write .env (no Docker needed)
# Checks the prerequisites, writes .env from .env.example with generated secrets, keys and
# passwords (an existing .env is kept: never overwritten), pulls the images, starts the stack
# and offers to create the first admin user.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 077  # .env and its temporary copy hold secrets

env_only=false
assume_yes=false
for arg in "$@"; do
    case $arg in
        --env-only) env_only=true ;;
        --yes) assume_yes=true ;;
        *) echo "usage: deploy/install.sh [--yes] [--env-only]" >&2; exit 2 ;;
    esac
done

compose=(docker compose -f docker-compose.prod.yml)

die() { echo "install.sh: $*" >&2; exit 1; }

# A random secret of URL-safe characters.
secret() { head -c "${1:-48}" /dev/urandom | base64 | tr -d '\n=' | tr '+/' '-_'; }
# A Fernet key: 32 random bytes, URL-safe base64 (what cryptography's Fernet.generate_key makes).
fernet_key() { head -c 32 /dev/urandom | base64 | tr -d '\n' | tr '+/' '-_'; }

# Set KEY=VALUE in .env: the line `KEY=...` is replaced (appended when absent). awk, not sed:
# values hold '/', '&' and '|'.
set_env() {
    local key=$1 value=$2
    KEY="$key" VALUE="$value" awk '
        BEGIN { key = ENVIRON["KEY"]; value = ENVIRON["VALUE"] }
        index($0, key "=") == 1 { print key "=" value; done = 1; next }
        { print }
        END { if (!done) print key "=" value }
    ' .env > .env.new
    cat .env.new > .env  # keeps .env's mode (600)
    rm .env.new
}

ask() {  # variable, question: the environment's value, else the answer
    local name=$1 question=$2 answer
    if [[ -n ${!name:-} ]]; then
        printf '%s' "${!name}"
        return
    fi
    $assume_yes && die "$name is required with --yes (set it in the environment)"
    read -r -p "$question " answer
    [[ -n $answer ]] || die "$name is required"
    printf '%s' "$answer"
}

# The DPO's address (LGPD SLA mails; production refuses to start without it, deskcomm.E011):
# the environment's, else the answer, else the first operator's address.
ask_dpo() {
    local admins=$1 first answer
    first=${admins%%,*}
    first=${first//[[:space:]]/}
    if [[ -n ${LGPD_DPO_EMAIL:-} ]]; then
        printf '%s' "$LGPD_DPO_EMAIL"
        return
    fi
    if ! $assume_yes; then
        read -r -p "Data protection officer's e-mail for the LGPD deadlines [$first]: " answer
    fi
    printf '%s' "${answer:-$first}"
}

write_env() {
    [[ -f .env.example ]] || die ".env.example not found (run from a Deskcomm checkout)"
    local domain admins email_url dpo
    domain=$(ask DESKCOMM_DOMAIN "Public host name (DNS pointing here, ports 80/443 open):")
    admins=$(ask ADMINS "Operators' e-mail address(es) for alerts (comma-separated):")
    email_url=$(ask EMAIL_URL "Outgoing mail, an smtp+tls:// URL with user, password, host:587:")
    dpo=$(ask_dpo "$admins")
    cp .env.example .env
    chmod 600 .env
    set_env DEBUG false
    set_env HTTPS true
    set_env SECRET_KEY "$(secret 64)"
    set_env ALLOWED_HOSTS "$domain"
    set_env CSRF_TRUSTED_ORIGINS "https://$domain"
    set_env PUBLIC_BASE_URL "https://$domain"
    set_env DESKCOMM_DOMAIN "$domain"
    set_env ADMINS "$admins"
    set_env EMAIL_URL "$email_url"
    set_env LGPD_DPO_EMAIL "$dpo"
    set_env SERVER_EMAIL "deskcomm@$domain"
    set_env LOG_FORMAT json
    set_env METRICS_TOKEN "$(secret 32)"
    set_env INTERNAL_CRON_SECRET "$(secret 32)"
    local key
    for key in ENCRYPTION_KEYS_WEBHOOKS ENCRYPTION_KEYS_CPF ENCRYPTION_KEYS_OAUTH \
        ENCRYPTION_KEYS_WAHA ENCRYPTION_KEYS_AI_PROVIDERS ENCRYPTION_KEYS_PIPELINES; do
        set_env "$key" "$(fernet_key)"
    done
    for key in POSTGRES_PASSWORD DESKCOMM_OWNER_PASSWORD DESKCOMM_WORKER_PASSWORD \
        DESKCOMM_WEB_PASSWORD GRAFANA_ADMIN_PASSWORD; do
        set_env "$key" "$(secret 24)"
    done
    echo "install.sh: wrote .env (mode 600); keep a copy of it somewhere safe: the keys in it"
    echo "            decrypt stored secrets, and the backups are useless without them."
}

if [[ -f .env ]]; then
    echo "install.sh: .env exists: kept as it is"
else
    write_env
fi
$env_only && exit 0

command -v docker >/dev/null || die "Docker is not installed (https://docs.docker.com/engine/install/)"
docker compose version >/dev/null 2>&1 || die "the Docker compose plugin is missing"
docker info >/dev/null 2>&1 || die "cannot reach the Docker daemon (are you in the docker group?)"

"${compose[@]}" pull
"${compose[@]}" up -d --wait
echo "install.sh: Deskcomm is up; the health check: https://$(grep -m1 '^DESKCOMM_DOMAIN=' .env | cut -d= -f2)/api/v1/health"
if ! $assume_yes; then
    read -r -p "Create the first admin user now? [Y/n] " answer
    if [[ ${answer:-y} =~ ^[Yy] ]]; then
        "${compose[@]}" run --rm web python manage.py createsuperuser
    fi
fi
