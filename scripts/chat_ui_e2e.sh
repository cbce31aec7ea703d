#!/usr/bin/env bash
# On demand (too heavy for CI): a real chat UI, Open WebUI, in front of Continuum, driven by a headless Chromium.
# It starts Continuum (own port, own Redis db, own SQLite and Qdrant Edge under the run folder) on the local model,
# starts Open WebUI in its own virtual environment pointed at Continuum (base URL, tenant key, the Open WebUI user
# forwarded as X-User-Id), then runs scripts/chat_ui_browser.py: sign up as the first (admin) user, chat 1 states a
# fact, wait until Continuum has extracted it, "New Chat", chat 2 asks for it back; screenshots of both chats.
# docs/chat-ui.md has the measured run.
#
#   ./scripts/chat_ui_e2e.sh
#
#   CONTINUUM_PORT=8011  OPEN_WEBUI_PORT=8012        where each listens (127.0.0.1)
#   OPEN_WEBUI_VERSION=0.12.4                        installed once into OPEN_WEBUI_VENV
#   OPEN_WEBUI_VENV=~/.cache/continuum/open-webui-venv (also holds playwright, the browser driver's library)
#   TORCH_SPEC=torch==2.13.0                         installed first, so open-webui does not pull a CUDA torch
#   CHROMIUM=/usr/bin/chromium                       Debian's chromium (apt-get install chromium; never `playwright
#                                                    install`)
#   CHAT_UI_E2E_DIR=~/.cache/continuum/chat-ui-e2e   run folder (data, logs, result.json); emptied at each run
#   SCREENSHOT_DIR=docs/screenshots                  where open-webui-chat1.png and open-webui-chat2.png go
#   REDIS_URL=redis://127.0.0.1:6379/11              a Redis db of its own (flushed at the start when it is this
#                                                    default), so another Continuum's worker on the same Redis never
#                                                    takes this one's tasks
#   DATABASE_URL=...                                 default: SQLite in the run folder
#   LLM_BASE_URL=... LLM_MODEL=...                   another model instead of the local one (scripts/local_model.py)
#   OPEN_WEBUI_BUILTIN_TOOLS=0                       1: leave Open WebUI's built-in tools on (see below)
#   MEMORY_WAIT_SECONDS=600  ANSWER_TIMEOUT_SECONDS=600
# Exit status 0 when chat 2's answer names the fact from chat 1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE="${CONTINUUM_CACHE_DIR:-$HOME/.cache/continuum}"
E2E="${CHAT_UI_E2E_DIR:-$CACHE/chat-ui-e2e}"
OWUI_VENV="${OPEN_WEBUI_VENV:-$CACHE/open-webui-venv}"
OWUI_VERSION="${OPEN_WEBUI_VERSION:-0.12.4}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
CONTINUUM_PORT="${CONTINUUM_PORT:-8011}"
OWUI_PORT="${OPEN_WEBUI_PORT:-8012}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
SCREENSHOT_DIR="${SCREENSHOT_DIR:-$ROOT/docs/screenshots}"
redis_own=0; [ -z "${REDIS_URL:-}" ] && redis_own=1
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/11}"
export CELERY_BROKER_URL="${CELERY_BROKER_URL:-$REDIS_URL}"

say() { echo "[chat-ui-e2e $(date +%H:%M:%S)] $*"; }
t_start=$(date +%s)

rm -rf "$E2E"; mkdir -p "$E2E/var" "$E2E/open-webui-data" "$SCREENSHOT_DIR"
export CONTINUUM_VAR_DIR="$E2E/var"
export DATABASE_URL="${DATABASE_URL:-sqlite:///$E2E/var/continuum.sqlite3}"

# --- Chromium (Debian's package) -----------------------------------------------------------------------------------
if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    say "installing Debian's chromium"; apt-get install -y chromium >"$E2E/apt-chromium.log" 2>&1
  else
    echo "No Chromium at $CHROMIUM: install Debian's package (sudo apt-get install chromium) or set CHROMIUM." >&2
    exit 1
  fi
fi

# --- Open WebUI in its own virtual environment (outside the repository) --------------------------------------------
stamp="$OWUI_VENV/.continuum-open-webui-$OWUI_VERSION"
if [ ! -f "$stamp" ]; then
  say "installing open-webui==$OWUI_VERSION and playwright into $OWUI_VENV (first run only, a few minutes, ~3 GB)"
  [ -x "$OWUI_VENV/bin/python" ] || { python3.11 -m venv "$OWUI_VENV" 2>/dev/null || python3 -m venv "$OWUI_VENV"; }
  "$OWUI_VENV/bin/pip" install -q --disable-pip-version-check "$TORCH_SPEC"
  "$OWUI_VENV/bin/pip" install -q --disable-pip-version-check "open-webui==$OWUI_VERSION" playwright
  touch "$stamp"
fi

# --- Continuum ----------------------------------------------------------------------------------------------------
source scripts/_venv.sh
PY=.venv/bin/python
export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-config.settings.local}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 LOG_LEVEL="${LOG_LEVEL:-INFO}"
pids=()
local_model=0
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true
  if [ "$local_model" = "1" ]; then "$PY" scripts/local_model.py stop || true; fi
}
trap cleanup EXIT INT TERM

if ! redis-cli -u "$REDIS_URL" ping >/dev/null 2>&1; then
  echo "Redis is not answering at $REDIS_URL (start one, or set REDIS_URL)." >&2; exit 1
fi
# The default db is this script's alone: drop what an earlier run left (a stale Celery queue, buffers). A REDIS_URL
# given in the environment is left as it is.
if [ "$redis_own" = "1" ]; then redis-cli -u "$REDIS_URL" flushdb >/dev/null; fi

if [ -z "${LLM_BASE_URL:-}" ]; then
  if ! curl -fs "http://127.0.0.1:${LOCAL_MODEL_PORT:-8090}/health" >/dev/null 2>&1; then local_model=1; fi
  say "starting the local model (scripts/local_model.py; the first run builds it)"
  "$PY" scripts/local_model.py start
  eval "$("$PY" scripts/local_model.py env)"
  # As scripts/run: the small model's inferences (its remember tool's memories) wait for a reviewer, so the fact chat
  # 2 can use is the one the extraction task draws from the user's own words.
  export TENANT_REVIEW_INFERRED_DEFAULT="${TENANT_REVIEW_INFERRED_DEFAULT:-1}"
fi

say "Continuum: migrate, tenant, API on 127.0.0.1:$CONTINUUM_PORT (worker and beat in the web process)"
"$PY" manage.py migrate --noinput -v 0
KEY=$("$PY" manage.py tenant_create "Open WebUI e2e" --slug "open-webui-e2e-$(date +%s)" \
      | sed -n 's/^api key (shown once): //p')
[ -n "$KEY" ] || { echo "tenant_create printed no key" >&2; exit 1; }
CONTINUUM_HOST_WORKER=1 .venv/bin/uvicorn config.asgi:application --host 127.0.0.1 --port "$CONTINUUM_PORT" \
  >"$E2E/continuum.log" 2>&1 & pids+=($!)
for _ in $(seq 1 180); do curl -fs "http://127.0.0.1:$CONTINUUM_PORT/readyz" >/dev/null 2>&1 && break; sleep 1; done
curl -fs "http://127.0.0.1:$CONTINUUM_PORT/readyz" >/dev/null || { echo "Continuum is not ready" >&2; tail -n 40 "$E2E/continuum.log" >&2; exit 1; }

# --- Open WebUI ---------------------------------------------------------------------------------------------------
say "Open WebUI $OWUI_VERSION on 127.0.0.1:$OWUI_PORT, pointed at http://127.0.0.1:$CONTINUUM_PORT/v1"
(
  cd "$E2E"
  export DATA_DIR="$E2E/open-webui-data" WEBUI_SECRET_KEY="continuum-chat-ui-e2e" WEBUI_AUTH=true ENABLE_SIGNUP=true
  # Continuum is the one connection; Ollama off.
  export ENABLE_OLLAMA_API=false ENABLE_OPENAI_API=true DEFAULT_MODELS=continuum
  export OPENAI_API_BASE_URLS="http://127.0.0.1:$CONTINUUM_PORT/v1" OPENAI_API_KEYS="$KEY"
  # The Open WebUI user's id goes to Continuum as X-User-Id (its end user's external id).
  export ENABLE_FORWARD_USER_INFO_HEADERS=true FORWARD_USER_INFO_HEADER_USER_ID=X-User-Id
  # Nothing from the internet: no model hub, no update check, no telemetry; no RAG embedding model to load.
  export OFFLINE_MODE=true HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ENABLE_VERSION_UPDATE_CHECK=false
  export RAG_EMBEDDING_MODEL_AUTO_UPDATE=false RAG_RERANKING_MODEL_AUTO_UPDATE=false BYPASS_EMBEDDING_AND_RETRIEVAL=true
  export RAG_EMBEDDING_ENGINE=openai RAG_OPENAI_API_BASE_URL="http://127.0.0.1:$CONTINUUM_PORT/v1" RAG_OPENAI_API_KEY="$KEY"
  export ANONYMIZED_TELEMETRY=false SCARF_NO_ANALYTICS=true DO_NOT_TRACK=true ENABLE_COMMUNITY_SHARING=false
  # Background model calls (title, tags, follow-ups, queries): Continuum answers them apart and stores nothing of them
  # (docs/openai.md, "A chat UI's background tasks"), but each is one more call on a CPU model: off unless
  # OPEN_WEBUI_TASKS=1 keeps Open WebUI's defaults.
  if [ "${OPEN_WEBUI_TASKS:-0}" != "1" ]; then
    export ENABLE_TITLE_GENERATION=false ENABLE_TAGS_GENERATION=false ENABLE_FOLLOW_UP_GENERATION=false
    export ENABLE_AUTOCOMPLETE_GENERATION=false ENABLE_SEARCH_QUERY_GENERATION=false ENABLE_RETRIEVAL_QUERY_GENERATION=false
  fi
  export ENABLE_EVALUATION_ARENA_MODELS=false USER_AGENT=continuum-chat-ui-e2e
  # Open WebUI 0.12.4 sends its 36 built-in tools (knowledge, notes, its own memories, calendar...; ~5,300 tokens)
  # with every chat turn: more than Continuum's context budget (CONTINUUM_CONTEXT_BUDGET, 4,000), and the chat shows
  # "The token budget is smaller than the tool definitions." The default model capability below turns them off
  # (Admin > Settings > Models; OPEN_WEBUI_BUILTIN_TOOLS=1 keeps Open WebUI's default).
  if [ "${OPEN_WEBUI_BUILTIN_TOOLS:-0}" != "1" ]; then
    export DEFAULT_MODEL_METADATA='{"capabilities": {"builtin_tools": false}}'
  fi
  exec "$OWUI_VENV/bin/open-webui" serve --host 127.0.0.1 --port "$OWUI_PORT"
) >"$E2E/open-webui.log" 2>&1 & pids+=($!)
t_owui=$(date +%s)
for _ in $(seq 1 300); do curl -fs "http://127.0.0.1:$OWUI_PORT/health" >/dev/null 2>&1 && break; sleep 1; done
curl -fs "http://127.0.0.1:$OWUI_PORT/health" >/dev/null || { echo "Open WebUI did not start" >&2; tail -n 40 "$E2E/open-webui.log" >&2; exit 1; }
say "Open WebUI answered /health after $(( $(date +%s) - t_owui ))s"

# --- the browser ----------------------------------------------------------------------------------------------------
say "browser check (headless $("$CHROMIUM" --version 2>/dev/null | head -n1))"
set +e
"$OWUI_VENV/bin/python" scripts/chat_ui_browser.py \
  --webui "http://127.0.0.1:$OWUI_PORT" --continuum "http://127.0.0.1:$CONTINUUM_PORT" --api-key "$KEY" \
  --chromium "$CHROMIUM" --screenshots "$SCREENSHOT_DIR" --result "$E2E/result.json" \
  --memory-wait "${MEMORY_WAIT_SECONDS:-600}" --answer-timeout "${ANSWER_TIMEOUT_SECONDS:-600}"
rc=$?
set -e
say "result: $E2E/result.json; logs: $E2E/continuum.log, $E2E/open-webui.log; total $(( $(date +%s) - t_start ))s"
[ "$rc" = "0" ] && say "PASSED" || say "FAILED (exit $rc)"
exit "$rc"
