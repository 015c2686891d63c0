#!/usr/bin/env bash
# Gives this machine what the test suite needs, from nothing, and reuses whatever is already
# there: a Docker engine, two Debian 12 base images built with debootstrap (no registry on the
# internet is reachable) and a third derived from them, a local registry holding them, and a
# wheelhouse for offline builds.
# And arm64 under emulation: qemu-user-static registered with binfmt_misc, an arm64 Debian 12 base
# (debootstrap --arch=arm64), and in the registry `library/debian:bookworm` as an OCI image index
# of the amd64 and arm64 stand-ins (each also under `bookworm-amd64`, `bookworm-arm64`).
#
# Run as root. Safe to run again: a second run only checks and prints.
# Overrides (the test fixtures read the same ones): ACCEL_TEST_REGISTRY, ACCEL_TEST_WHEELHOUSE,
# ACCEL_TEST_PODMAN_USER, ACCEL_TEST_PODMAN_CONF, ACCEL_TEST_DEVCONTAINER_CLI.
set -euo pipefail

CACHE=/var/cache/accel-images
REGISTRY="${ACCEL_TEST_REGISTRY:-127.0.0.1:5000}"
WHEELHOUSE="${ACCEL_TEST_WHEELHOUSE:-$CACHE/wheelhouse}"
HOST_SOURCES=/etc/apt/sources.list.d/debian.sources
PACKAGES=(docker.io docker-registry debootstrap skopeo curl make podman uidmap qemu-user-static)
SUITE=bookworm

# local image -> debootstrap --include list ("" = minbase only, like the real slim image)
PYTHON_IMAGE=local/debian:bookworm
SLIM_IMAGE=local/debian:bookworm-slim
declare -A INCLUDES=(
    ["$PYTHON_IMAGE"]="python3,python3-pip,python3-venv,ca-certificates"
    ["$SLIM_IMAGE"]=""
)
# The arm64 stand-in: the Python one's packages, for arm64 (`uname -m` in it says aarch64).
ARM64_IMAGE=local/debian-arm64:bookworm
INCLUDES["$ARM64_IMAGE"]="${INCLUDES[$PYTHON_IMAGE]}"
declare -A ARCH=(["$PYTHON_IMAGE"]=amd64 ["$SLIM_IMAGE"]=amd64 ["$ARM64_IMAGE"]=arm64)
# A base as corporate and vendor images often are, made from the slim stand-in: apt's package
# lists and package caches left in it (/var/lib/apt/lists, /var/cache/apt/*.bin) with downloaded
# .deb files (/var/cache/apt/archives), and a user with UID 1000 and a home directory, as
# ubuntu:24.04 has (`ubuntu`). A step that deleted any of them would leave a whiteout dated with
# the build's time (tests/integration/test_apt_cache_base.py).
APT_CACHE_IMAGE=local/debian:bookworm-slim-apt-cache
APT_CACHE_DOCKERFILE="FROM $SLIM_IMAGE
RUN apt-get update \\
    && apt-get install -y --download-only --no-install-recommends ca-certificates openssl curl \\
    && useradd --uid 1000 --create-home --shell /bin/bash ubuntu"
# local image -> its name in the registry, where builds find it through a registry mirror
# (the apt-cache base under its own prefix: --registry-mirror docker.io=REGISTRY/apt-cache)
declare -A MIRRORED=(
    ["$SLIM_IMAGE"]=library/debian:bookworm-slim
    ["$PYTHON_IMAGE"]=library/debian:bookworm-amd64
    ["$ARM64_IMAGE"]=library/debian:bookworm-arm64
    ["$APT_CACHE_IMAGE"]=apt-cache/library/debian:bookworm-slim
)
# The image index of both Python stand-ins: one tag, two platforms, as Docker Hub's debian tags are.
INDEX_TAG=library/debian:bookworm
BINFMT=/proc/sys/fs/binfmt_misc
QEMU_CONF=/usr/lib/binfmt.d/qemu-aarch64.conf

STARTED=$SECONDS
step_started=$SECONDS

say() { echo "[setup] $*"; }
die() { echo "[setup] ERROR: $*" >&2; exit 1; }
ready() { say "$1 ($((SECONDS - step_started)) s)"; step_started=$SECONDS; }

# wait_for WHAT SECONDS LOG COMMAND... : poll COMMAND once a second, give up after SECONDS.
wait_for() {
    local what=$1 limit=$2 log=$3
    shift 3
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            tail -n 20 "$log" >&2 || true
            die "$what not ready after ${limit} s (log: $log)"
        fi
        sleep 1
    done
}

install_packages() {
    local missing=() pkg
    for pkg in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        say "installing ${missing[*]}"
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null </dev/null
    fi
    ready "packages present"
}

start_engine() {
    if ! docker info >/dev/null 2>&1; then
        setsid dockerd >/var/log/dockerd.log 2>&1 </dev/null 9>&- &
        wait_for "docker engine" 60 /var/log/dockerd.log docker info
    fi
    ready "docker engine ready"
}

# The URIs of the apt source whose Suites include bookworm: the mirror this machine can reach.
debian_mirror() {
    [[ -r $HOST_SOURCES ]] || die "no $HOST_SOURCES: cannot tell which Debian mirror to use"
    local mirror
    mirror=$(awk -v RS= -v suite="$SUITE" '
        {
            uris = ""; suites = ""
            n = split($0, lines, "\n")
            for (i = 1; i <= n; i++) {
                line = lines[i]
                if (tolower(line) ~ /^uris:/) { sub(/^[^:]*:[ \t]*/, "", line); split(line, u, /[ \t]+/); uris = u[1] }
                if (tolower(line) ~ /^suites:/) { sub(/^[^:]*:/, "", line); suites = " " line " " }
            }
            gsub(/\t/, " ", suites)
            if (uris != "" && suites ~ (" " suite " ")) { print uris; exit }
        }' "$HOST_SOURCES")
    [[ -n $mirror ]] || die "$HOST_SOURCES has no entry for suite $SUITE"
    echo "$mirror"
}

# Bumped whenever the way the stand-ins are made changes, so machines that keep their images
# between runs rebuild them.
STANDIN_VERSION=2

# register_binfmt: arm64 binaries run under qemu-user-static, in containers too. The F flag
# (Debian's qemu-aarch64.conf sets it) opens the interpreter once, at registration, so a container
# that has no /usr/libexec/qemu-binfmt finds it all the same. Safe to run again.
register_binfmt() {
    if [[ ! -e $BINFMT/register ]]; then
        mount -t binfmt_misc binfmt_misc "$BINFMT" || die "cannot mount binfmt_misc on $BINFMT"
    fi
    if [[ -e $BINFMT/qemu-aarch64 ]] && ! grep -q '^flags:.*F' "$BINFMT/qemu-aarch64"; then
        echo -1 >"$BINFMT/qemu-aarch64" # registered without F: containers could not find qemu
    fi
    if [[ ! -e $BINFMT/qemu-aarch64 ]]; then
        [[ -r $QEMU_CONF ]] || die "no $QEMU_CONF (package qemu-user-static)"
        cat "$QEMU_CONF" >"$BINFMT/register" || die "cannot register $QEMU_CONF with binfmt_misc"
    fi
    ready "arm64 emulation registered ($(sed -n 's/^interpreter //p' "$BINFMT/qemu-aarch64"))"
}

# build_image IMAGE: debootstrap a root file system (of IMAGE's architecture) and make it an image,
# unless IMAGE exists and was made by this version of the script.
build_image() {
    local image=$1 includes=${INCLUDES[$1]} arch=${ARCH[$1]}
    if [[ "$(docker image inspect -f '{{index .Config.Labels "io.accel-images.standin"}} {{.Architecture}}' \
        "$image" 2>/dev/null)" == "$STANDIN_VERSION $arch" ]]; then
        ready "$image present"
        return
    fi
    local name=${image#local/} mirror rootfs log
    name=${name//:/-}
    rootfs=$CACHE/rootfs-$name
    log=$CACHE/debootstrap-$name.log
    mirror=$(debian_mirror)
    rm -rf "$rootfs"
    say "building $image ($arch) with debootstrap from $mirror (log: $log)"
    if ! debootstrap --arch="$arch" --variant=minbase ${includes:+--include="$includes"} \
        "$SUITE" "$rootfs" "$mirror" >"$log" 2>&1 </dev/null; then
        tail -n 20 "$log" >&2
        die "debootstrap of $image failed (log: $log)"
    fi
    # Same apt sources as the real Debian image (deb822, with updates and security), on the
    # mirror this machine reaches.
    install -m 0644 "$HOST_SOURCES" "$rootfs/etc/apt/sources.list.d/debian.sources"
    rm -f "$rootfs/etc/apt/sources.list"
    # Like the official image: no package lists, caches or downloaded packages left behind
    # (they would inflate the base and make image-size measurements wrong).
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
    if [[ $arch == amd64 ]]; then
        tar -C "$rootfs" -c . | docker import --change 'CMD ["bash"]' \
            --change "LABEL io.accel-images.standin=$STANDIN_VERSION" - "$image" >/dev/null ||
            die "docker import of $image failed"
    else
        load_image "$rootfs" "$image" "$arch" || die "docker load of $image failed"
    fi
    rm -rf "$rootfs"
    ready "$image built"
}

# The apt-cache base, derived from the slim stand-in (docker build, Dockerfile on stdin), unless
# it exists and was made from the slim stand-in there is now by this version of the recipe.
APT_CACHE_VERSION=1
build_apt_cache_image() {
    local slim_id made_from
    slim_id=$(docker image inspect -f '{{.Id}}' "$SLIM_IMAGE")
    made_from=$(docker image inspect -f '{{index .Config.Labels "io.accel-images.standin.apt-cache"}}' \
        "$APT_CACHE_IMAGE" 2>/dev/null || true)
    if [[ "$made_from" == "$APT_CACHE_VERSION $slim_id" ]]; then
        ready "$APT_CACHE_IMAGE present"
        return
    fi
    local log=$CACHE/apt-cache-base.log
    say "building $APT_CACHE_IMAGE from $SLIM_IMAGE (log: $log)"
    if ! docker build --no-cache -t "$APT_CACHE_IMAGE" \
        --label "io.accel-images.standin.apt-cache=$APT_CACHE_VERSION $slim_id" - \
        <<<"$APT_CACHE_DOCKERFILE" >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        die "building $APT_CACHE_IMAGE failed (log: $log)"
    fi
    ready "$APT_CACHE_IMAGE built"
}

# load_image ROOTFS IMAGE ARCH: ROOTFS as a one-layer image whose config says linux/ARCH. Docker
# 20.10's `docker import` records the engine's own architecture whatever the files are, so the
# image is written as `docker save` writes one (a layer tar, a config, manifest.json) and loaded.
load_image() {
    python3 - "$1" "$2" "$3" "$STANDIN_VERSION" <<'PY' | docker load >/dev/null
import hashlib, io, json, subprocess, sys, tarfile
rootfs, name, arch, version = sys.argv[1:5]
layer = subprocess.run(["tar", "-C", rootfs, "-c", "."], capture_output=True, check=True).stdout
config = json.dumps({
    "architecture": arch, "os": "linux", "created": "1970-01-01T00:00:00Z",
    "config": {"Cmd": ["bash"], "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
               "Labels": {"io.accel-images.standin": version}},
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}},
    sort_keys=True).encode()
config_name = hashlib.sha256(config).hexdigest() + ".json"
archive = io.BytesIO()
with tarfile.open(fileobj=archive, mode="w") as out:
    def add(member, data):
        info = tarfile.TarInfo(member)
        info.size = len(data)
        out.addfile(info, io.BytesIO(data))
    add(config_name, config)
    add("layer.tar", layer)
    add("manifest.json", json.dumps([{"Config": config_name, "RepoTags": [name], "Layers": ["layer.tar"]}]).encode())
sys.stdout.buffer.write(archive.getvalue())
PY
}

# check_arm64 IMAGE: the arm64 stand-in runs, under emulation, and says it is aarch64.
check_arm64() {
    local machine
    machine=$(docker run --rm --platform linux/arm64 --network none "$1" uname -m 2>&1) ||
        die "$1 does not run under emulation: $machine"
    [[ $machine == aarch64 ]] || die "$1 says it runs on $machine, not aarch64"
    ready "$1 runs as aarch64 under emulation"
}

write_registry_config() {
    cat >"$CACHE/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $CACHE/registry-data
  delete:
    enabled: true
http:
  addr: $REGISTRY
EOF
}

registry_answers() { curl -fsS -m 3 "http://$REGISTRY/v2/" >/dev/null 2>&1; }

start_registry() {
    if ! registry_answers; then
        mkdir -p "$CACHE/registry-data"
        write_registry_config
        setsid docker-registry serve "$CACHE/registry.yml" >>/var/log/accel-registry.log 2>&1 </dev/null 9>&- &
        wait_for "registry on $REGISTRY" 30 /var/log/accel-registry.log registry_answers
    fi
    # Tests delete tags: a registry found running without storage delete answers 405 here.
    local zero=sha256:0000000000000000000000000000000000000000000000000000000000000000
    [[ "$(curl -s -m 10 -o /dev/null -w '%{http_code}' -X DELETE \
        "http://$REGISTRY/v2/library/debian/manifests/$zero")" != 405 ]] ||
        die "the registry on $REGISTRY does not allow deletes (storage.delete.enabled)"
    ready "registry ready on $REGISTRY"
}

# The image ID (config digest) the registry holds for REPO:TAG, or nothing.
registry_image_id() {
    curl -fsS -m 10 -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
        "http://$REGISTRY/v2/${1%:*}/manifests/${1##*:}" 2>/dev/null |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["config"]["digest"])' 2>/dev/null || true
}

push_image() {
    local image=$1 target="$REGISTRY/${MIRRORED[$1]}"
    if [[ "$(registry_image_id "${MIRRORED[$image]}")" == "$(docker image inspect -f '{{.Id}}' "$image")" ]]; then
        ready "$target up to date"
        return
    fi
    docker tag "$image" "$target"
    docker push "$target" >/dev/null || die "push of $target failed"
    ready "$target pushed"
}

# push_index: INDEX_TAG as an OCI image index of the per-architecture stand-ins already pushed (their
# MIRRORED names), written over the registry's API (no tool here writes indexes); unchanged when the
# registry already serves exactly that index.
push_index() {
    local amd64="${MIRRORED[$PYTHON_IMAGE]}" arm64="${MIRRORED[$ARM64_IMAGE]}"
    python3 - "http://$REGISTRY" "$INDEX_TAG" "$amd64" "$arm64" <<'PY' || die "writing the index $REGISTRY/$INDEX_TAG failed"
import hashlib, json, sys, urllib.request
base, index_tag, amd64, arm64 = sys.argv[1:5]
repository, tag = index_tag.rsplit(":", 1)
ACCEPT = ", ".join(["application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json"])
def get(reference):
    request = urllib.request.Request(f"{base}/v2/{repository}/manifests/{reference}", headers={"Accept": ACCEPT})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
        return body, response.headers["Content-Type"].split(";")[0]
manifests = []
for arch, name in (("amd64", amd64), ("arm64", arm64)):
    body, media_type = get(name.rsplit(":", 1)[1])
    manifests.append({"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(body).hexdigest(),
                      "size": len(body), "platform": {"architecture": arch, "os": "linux"}})
index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                    "manifests": manifests}, sort_keys=True, separators=(",", ":")).encode()
try:
    current = get(tag)[0]
except OSError:
    current = b""
if current != index:
    request = urllib.request.Request(f"{base}/v2/{repository}/manifests/{tag}", data=index, method="PUT",
                                     headers={"Content-Type": "application/vnd.oci.image.index.v1+json"})
    urllib.request.urlopen(request, timeout=30).close()
    print("written")
PY
    ready "$REGISTRY/$INDEX_TAG is the index of $amd64 and $arm64"
}

# What the CI image installs from the wheelhouse: torch and its dependencies, numpy, IPython with
# its dependencies and pip (every image installs them; containers here reach no package index).
fill_wheelhouse() {
    if compgen -G "$WHEELHOUSE/torch-2.13.0*.whl" >/dev/null && compgen -G "$WHEELHOUSE/numpy-*.whl" >/dev/null \
        && compgen -G "$WHEELHOUSE/ipython-*.whl" >/dev/null && compgen -G "$WHEELHOUSE/pip-*.whl" >/dev/null; then
        ready "wheelhouse present at $WHEELHOUSE"
        return
    fi
    mkdir -p "$WHEELHOUSE"
    local log=$CACHE/wheelhouse.log
    if ! python3 -m pip download --only-binary=:all: --python-version 3.11 \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
        -d "$WHEELHOUSE" torch==2.13.0 numpy ipython pip >"$log" 2>&1 </dev/null; then
        tail -n 20 "$log" >&2
        die "pip download into $WHEELHOUSE failed (log: $log)"
    fi
    ready "wheelhouse filled at $WHEELHOUSE"
}

# A companion built for another torch: the package index's torchvision 0.28.0 is linked against the
# index's CUDA torch and does not load beside torch 2.13.0+cpu ("operator torchvision::nms does not
# exist"). The smoke tests prove the workload catches exactly that. Kept apart from the wheelhouse.
MISMATCHED="${ACCEL_TEST_MISMATCHED:-$CACHE/mismatched-wheels}"

fill_mismatched() {
    if compgen -G "$MISMATCHED/torchvision-0.28.0-*.whl" >/dev/null; then
        ready "mismatched companion present at $MISMATCHED"
        return
    fi
    mkdir -p "$MISMATCHED"
    local log=$CACHE/mismatched.log
    if ! python3 -m pip download --no-deps --only-binary=:all: --python-version 3.11 \
        --platform manylinux_2_28_x86_64 --index-url https://pypi.org/simple \
        -d "$MISMATCHED" torchvision==0.28.0 >"$log" 2>&1 </dev/null; then
        tail -n 20 "$log" >&2
        die "pip download into $MISMATCHED failed (log: $log)"
    fi
    ready "mismatched companion downloaded to $MISMATCHED"
}

# Rootless Podman for the runtime tests: a user of its own with subordinate ids, and a containers.conf
# (CONTAINERS_CONF points at it) with what this kind of machine needs:
# - nofile/nproc no higher than the host's hard limits: Podman raises both by default, and root here has no
#   CAP_SYS_RESOURCE ("error setting rlimit type 7: operation not permitted");
# - runc: crun 1.8 refuses these hosts' hybrid cgroups ("cgroups in hybrid mode not supported");
# - no network: slirp4netns needs /dev/net/tun, which only root may open here.
# And /dev/mqueue, which systemd mounts on an ordinary host and Podman binds for --ipc host.
PODMAN_USER="${ACCEL_TEST_PODMAN_USER:-accel-podman}"
PODMAN_CONF="${ACCEL_TEST_PODMAN_CONF:-$CACHE/podman/containers.conf}"

setup_podman() {
    id -u "$PODMAN_USER" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$PODMAN_USER"
    local ids home
    for ids in subuid subgid; do
        grep -q "^$PODMAN_USER:" "/etc/$ids" || echo "$PODMAN_USER:300000:65536" >>"/etc/$ids"
    done
    mkdir -p "$(dirname "$PODMAN_CONF")"
    printf '%s\n' '[containers]' 'default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]' 'netns = "none"' '' \
        '[engine]' 'runtime = "runc"' >"$PODMAN_CONF"
    chmod 0644 "$PODMAN_CONF"
    home=$(getent passwd "$PODMAN_USER" | cut -d: -f6)
    install -d -o "$PODMAN_USER" -g "$PODMAN_USER" "$home/.config" "$home/.config/containers"
    printf '[storage]\ndriver = "overlay"\n' >"$home/.config/containers/storage.conf"
    chown "$PODMAN_USER:" "$home/.config/containers/storage.conf"
    if ! mountpoint -q /dev/mqueue 2>/dev/null; then
        { mkdir -p /dev/mqueue && mount -t mqueue mqueue /dev/mqueue; } || die "cannot mount /dev/mqueue"
    fi
    ready "rootless podman for $PODMAN_USER ($PODMAN_CONF)"
}

# The devcontainers CLI (npm's @devcontainers/cli; its package.json wants Node.js >= 20), in the cache.
DEVCONTAINER_CLI="${ACCEL_TEST_DEVCONTAINER_CLI:-$CACHE/devcontainers-cli/node_modules/.bin/devcontainer}"
DEVCONTAINER_CLI_VERSION=0.89.0

install_devcontainer_cli() {
    if [[ -x $DEVCONTAINER_CLI && "$("$DEVCONTAINER_CLI" --version 2>/dev/null)" == "$DEVCONTAINER_CLI_VERSION" ]]; then
        ready "devcontainers CLI $DEVCONTAINER_CLI_VERSION present"
        return
    fi
    { command -v npm >/dev/null && (($(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0) >= 20)); } ||
        die "the devcontainers CLI needs Node.js >= 20 and npm on PATH"
    local prefix=${DEVCONTAINER_CLI%/node_modules/.bin/devcontainer} log=$CACHE/devcontainers-cli.log
    mkdir -p "$prefix"
    if ! npm install --prefix "$prefix" --no-audit --no-fund "@devcontainers/cli@$DEVCONTAINER_CLI_VERSION" \
        >"$log" 2>&1 </dev/null; then
        tail -n 20 "$log" >&2
        die "npm install of the devcontainers CLI failed (log: $log)"
    fi
    ready "devcontainers CLI $DEVCONTAINER_CLI_VERSION installed in $prefix"
}

main() {
    ((EUID == 0)) || die "run as root"
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.setup.lock" # daemons started below must not inherit it: 9>&-
    if ! flock -n 9; then
        say "waiting for another setup-host.sh to finish"
        flock -w 900 9 || die "another setup-host.sh held $CACHE/.setup.lock for 15 min"
    fi
    install_packages
    start_engine
    register_binfmt
    build_image "$PYTHON_IMAGE"
    build_image "$SLIM_IMAGE"
    build_image "$ARM64_IMAGE"
    check_arm64 "$ARM64_IMAGE"
    build_apt_cache_image
    start_registry
    push_image "$SLIM_IMAGE"
    push_image "$PYTHON_IMAGE"
    push_image "$APT_CACHE_IMAGE"
    push_image "$ARM64_IMAGE"
    push_index
    fill_wheelhouse
    fill_mismatched
    setup_podman
    install_devcontainer_cli
    say "all ready ($((SECONDS - STARTED)) s)"
}

main "$@"
