#!/bin/sh
# Build the nel image (default nel-workbench:local) from the local base image, without any registry.
#
#   deploy/build-image.sh            build it unless an image with this source's hash exists already
#   deploy/build-image.sh --force    build it again
#
# 1. deploy/base-image.sh makes the base image (debootstrap bookworm + python3) if it is missing.
# 2. The host's pip builds a wheelhouse in build/nel-image/: deps/ holds the runtime dependencies (pinned to
#    the versions installed in the repository's .venv when it exists, so the image runs what the tests ran;
#    pip's cache makes a rebuild cheap, and a complete wheelhouse is reused offline), app/ the nel wheel.
# 3. docker build (the classic builder) installs them in the image with --no-index: the build itself needs
#    no network, so it works whether or not containers on the default bridge reach PyPI.
#
# Environment: NEL_IMAGE, NEL_BASE_IMAGE, NEL_PIP (the pip to build wheels with: default .venv/bin/pip, else
# python3 -m pip; it must run Python 3.11, the image's).
set -eu

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
IMAGE="${NEL_IMAGE:-nel-workbench:local}"
BASE="${NEL_BASE_IMAGE:-nel-base:bookworm}"
CTX="$ROOT/build/nel-image"
force=0
case "${1:-}" in
    --force) force=1 ;;
    "") ;;
    *) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

# The image is a function of these files (and the dependency pins): its label records their hash.
source_hash() {
    cd "$ROOT"
    {
        find workbench store benchmarks -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 \
            | sort -z | xargs -0 sha256sum
        sha256sum pyproject.toml README.md deploy/Dockerfile deploy/healthcheck.py
        [ -x .venv/bin/pip ] && .venv/bin/pip freeze --exclude-editable --disable-pip-version-check 2>/dev/null \
            | grep '==' | sort
    } | sha256sum | cut -c1-16
}
HASH="$(source_hash)"
if [ "$force" = 0 ] && [ "$(docker image inspect -f '{{index .Config.Labels "org.nel.source-hash"}}' "$IMAGE" \
        2>/dev/null || true)" = "$HASH" ]; then
    echo "image $IMAGE is up to date (source hash $HASH; --force to rebuild)"
    exit 0
fi

# The base image (debootstrap, ~1.5 min when missing) builds while the wheelhouse is made.
NEL_BASE_IMAGE="$BASE" "$ROOT/deploy/base-image.sh" &
base_pid=$!

if [ -n "${NEL_PIP:-}" ]; then PIP="$NEL_PIP"
elif [ -x "$ROOT/.venv/bin/pip" ]; then PIP="$ROOT/.venv/bin/pip"
else PIP="python3 -m pip"
fi
mkdir -p "$CTX/deps"
rm -rf "$CTX/app" "$CTX/deps.new" && mkdir -p "$CTX/app"
constraints="$CTX/constraints.txt"
if [ -x "$ROOT/.venv/bin/pip" ]; then
    "$ROOT/.venv/bin/pip" freeze --exclude-editable --disable-pip-version-check | grep '==' >"$constraints"
else
    : >"$constraints"
fi
# The image holds every extra but [ray] (large; a Ray cluster's nodes bring their own): what it held before the
# front ends and integrations became extras.
EXTRAS="tui,notebook,serve,docker,math"
pipwheel() { $PIP wheel --quiet --disable-pip-version-check --wheel-dir "$CTX/deps.new" -c "$constraints" \
                  --find-links "$CTX/buildsys" "$@" "$ROOT[$EXTRAS]"; }
# Offline first (the last build's wheelhouse has every pinned dependency, buildsys/ the build backend), else
# from the index; the new wheelhouse holds exactly this resolution, so no stale version is left to install.
echo "wheelhouse $CTX ..."
mkdir -p "$CTX/buildsys"
if ! pipwheel --no-index --find-links "$CTX/deps" 2>/dev/null; then
    rm -rf "$CTX/deps.new"
    { $PIP download --quiet --disable-pip-version-check --dest "$CTX/buildsys" 'hatchling>=1.25' && pipwheel; } \
        2>"$CTX/pip.log" || { tail -n 40 "$CTX/pip.log" >&2; kill "$base_pid" 2>/dev/null; exit 1; }
fi
rm -rf "$CTX/deps" && mv "$CTX/deps.new" "$CTX/deps"
mv "$CTX"/deps/nel_workbench-*.whl "$CTX/app/"
cp "$ROOT/deploy/healthcheck.py" "$CTX/healthcheck.py"
wait "$base_pid" || { echo "$0: building the base image $BASE failed" >&2; exit 1; }

echo "docker build $IMAGE (from $BASE) ..."
DOCKER_BUILDKIT=0 docker build --quiet -f "$ROOT/deploy/Dockerfile" --build-arg "BASE=$BASE" \
    --label "org.nel.source-hash=$HASH" -t "$IMAGE" "$CTX" >/dev/null
echo "built image $IMAGE (source hash $HASH)"
