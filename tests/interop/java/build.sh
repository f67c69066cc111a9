#!/usr/bin/env bash
# Builds everything the Java side of the interop tests needs, idempotently:
#   target/lib-4.9.8/         rocketmq-client + rocketmq-tools 4.9.8 (+ deps)
#   target/lib-4.9.8-server/  rocketmq-broker + rocketmq-namesrv 4.9.7 (+ deps)
#                             (Apache did not publish broker/namesrv 4.9.8 to
#                             Maven Central; 4.9.7 is the newest 4.9 server)
#   target/lib-5.3.3/         rocketmq-client + rocketmq-tools 5.3.3 (+ deps)
#   target/lib-5.3.3-server/  rocketmq-broker + rocketmq-namesrv 5.3.3 (+ deps)
#   target/lib-V-server/, target/lib-V-proxy/ only (no client jars) for each V of
#                             $RMQPY_INTEROP_SERVER_VERSIONS (default none): a newer
#                             broker + proxy as a reference, e.g. 5.4.0 for the gRPC
#                             differential harness (tests/interop/grpc_diff_env.py)
#   target/harness.jar        our harness (src/main/java), built against 4.9.8
#   target/grpc-harness.jar   the gRPC harness (grpc/src), built against the
#                             5.x gRPC client rocketmq-client-java, whose shaded
#                             jar goes to target/lib-grpc-VERSION/ (grpc/pom.xml)
# A lib directory is reused when its .complete stamp matches libs/pom.xml and
# the versions; harness.jar is rebuilt only when a source or pom.xml is newer.
# Maven's cache is ~/.m2 (or $MAVEN_REPO_LOCAL when set). What a build made is also kept in a
# machine-wide cache ($RMQPY_BUILD_CACHE, default /var/cache/rmqpy-interop when writable, else
# ~/.cache/rmqpy-interop), keyed by a hash of its inputs, so that a fresh clone copies the lib
# directories and jars instead of running Maven again (RMQPY_BUILD_CACHE=off: no cache).
# Needs a JDK >= 11 (17 is what the tests use) and Maven; when either is
# missing and apt-get is usable as root, installs them (unless
# RMQPY_INTEROP_NO_APT=1).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"
VERSIONS="${RMQPY_INTEROP_VERSIONS:-4.9.8 5.3.3}"
SERVER_ONLY_VERSIONS="${RMQPY_INTEROP_SERVER_VERSIONS:-}"

server_version() {
    case "$1" in
        4.9.8) echo 4.9.7 ;;   # rocketmq-broker/namesrv 4.9.8 are not on Maven Central
        *) echo "$1" ;;
    esac
}

need_tools() {
    local missing=()
    command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
    command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
    command -v mvn >/dev/null 2>&1 || missing+=(maven)
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    if [ "${RMQPY_INTEROP_NO_APT:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "build.sh: installing ${missing[*]}" >&2
        # one apt at a time: test.sh runs this beside setup_host.sh, which may install too
        flock /var/lock/rmqpy-apt.lock apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive flock /var/lock/rmqpy-apt.lock apt-get install -y -qq --no-install-recommends \
            $(printf '%s\n' "${missing[@]}" | sort -u) >&2
    else
        echo "build.sh: missing ${missing[*]} (need a JDK 17 and Maven)" >&2
        exit 1
    fi
}

MVN_ARGS=(-B -q -Dstyle.color=never)
if [ -n "${MAVEN_REPO_LOCAL:-}" ]; then
    MVN_ARGS+=("-Dmaven.repo.local=$MAVEN_REPO_LOCAL")
fi
mvn_quiet() { # Debian's Maven 3.8.7 prints stray ESC[0m even with -B -q: strip them
    mvn "${MVN_ARGS[@]}" "$@" 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g; /^$/d' >&2
}

mkdir -p target
# One build at a time (parallel pytest processes may all call this).
exec 9>target/.build.lock
if command -v flock >/dev/null 2>&1; then
    flock 9
fi

pom_sum="$(sha256sum libs/pom.xml | cut -c1-16)"

# shellcheck source=../build_cache.sh
. "$HERE/../build_cache.sh"
[ "$cache" = off ] || mkdir -p "$cache/java"
key_of() { printf '%s' "$1" | sha256sum | cut -c1-24; }
cache_get() { # cache_get KEY DEST: copy the cached entry KEY to DEST; false when there is none
    [ "$cache" != off ] && [ -e "$cache/java/$1" ] && cp -a "$cache/java/$1" "$2"
}
cache_put() { # cache_put KEY SRC: keep a copy of SRC under KEY (written aside, then renamed)
    [ "$cache" = off ] && return 0
    local tmp="$cache/java/.$1.tmp.$$"
    rm -rf "$tmp" && cp -a "$2" "$tmp" && { mv -T "$tmp" "$cache/java/$1" 2>/dev/null || rm -rf "$tmp"; }
}
sources_sum() { # a hash of the contents and names of the files under the given paths
    find "$@" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-24
}
tools_checked=0

fetch_libs() { # version profile server_version dir
    local v="$1" profile="$2" sv="$3" dir="$4"
    local stamp="pom=$pom_sum version=$v server=$sv profile=$profile"
    if [ -f "$dir/.complete" ] && [ "$(cat "$dir/.complete")" = "$stamp" ]; then
        return 0
    fi
    if [ "$tools_checked" = 0 ]; then need_tools; tools_checked=1; fi
    # fetch into a new directory and swap it in, so that JVMs running from
    # the old one (other test processes) keep working
    local tmp="$dir.tmp.$$" key
    key="lib-$(key_of "$stamp")"
    rm -rf "$tmp"
    if cache_get "$key" "$tmp" && [ "$(cat "$tmp/.complete" 2>/dev/null)" = "$stamp" ]; then
        echo "build.sh: $profile jars for RocketMQ $v from $cache/java/$key" >&2
    else
        rm -rf "$tmp"
        echo "build.sh: fetching $profile jars for RocketMQ $v (server $sv) into $dir" >&2
        mvn_quiet -f libs/pom.xml -P "$profile" -Dlib.dir="$HERE/$tmp" \
            -Drocketmq.version="$v" -Drocketmq.server.version="$sv" package
        # the RocketMQ jars really used, for humans
        (cd "$tmp" && ls rocketmq-*.jar) > "$tmp/.rocketmq-jars"
        echo "$stamp" > "$tmp/.complete"
        cache_put "$key" "$tmp"
    fi
    rm -rf "$dir.old.$$"
    if [ -e "$dir" ]; then mv "$dir" "$dir.old.$$"; fi
    mv "$tmp" "$dir"
    rm -rf "$dir.old.$$"
}

for v in $VERSIONS; do
    fetch_libs "$v" client "$v" "target/lib-$v"
    fetch_libs "$v" server "$(server_version "$v")" "target/lib-$v-server"
    case "$v" in  # Apache's gRPC proxy exists from 5.0 on
        5.*) fetch_libs "$v" proxy "$v" "target/lib-$v-proxy" ;;
    esac
done
for v in $SERVER_ONLY_VERSIONS; do  # a reference broker + proxy: no client, no tools
    fetch_libs "$v" server "$(server_version "$v")" "target/lib-$v-server"
    fetch_libs "$v" proxy "$v" "target/lib-$v-proxy"
done

build_jar() { # build_jar NAME POM BUILD EXTRA SOURCES...: Maven-build target/NAME.jar (in target/BUILD,
    # with the directories target/EXTRA* it fills) unless it is newer than SOURCES or the cache has it
    local name="$1" pom="$2" build="$3" extra="$4"
    shift 4
    local jar="target/$name.jar"
    if [ -f "$jar" ] && [ -z "$(find "$@" -newer "$jar" -type f 2>/dev/null | head -1)" ]; then
        return 0
    fi
    local key out="target/.$name.out.$$" d
    key="$name-$(sources_sum "$@")"
    rm -rf "$out"
    if cache_get "$key" "$out"; then
        echo "build.sh: $jar from $cache/java/$key" >&2
    else
        if [ "$tools_checked" = 0 ]; then need_tools; tools_checked=1; fi
        echo "build.sh: building $jar" >&2
        rm -rf "target/$build" "$out"
        mvn_quiet -f "$pom" package
        mkdir -p "$out/extra"
        cp "target/$build/$name.jar" "$out/$name.jar"
        if [ -n "$extra" ]; then
            for d in target/"$extra"*; do [ -d "$d" ] && cp -a "$d" "$out/extra/"; done
        fi
        cache_put "$key" "$out"
    fi
    for d in "$out"/extra/*; do
        [ -e "$d" ] || continue
        [ -e "target/$(basename "$d")" ] || mv "$d" target/
    done
    mv -f "$out/$name.jar" "$jar"
    rm -rf "$out"
}

build_jar harness pom.xml harness-build "" src pom.xml
# the gRPC client harness: its own module and class path (grpc/pom.xml), with the shaded
# rocketmq-client-java it copies to target/lib-grpc-VERSION/
build_jar grpc-harness grpc/pom.xml grpc-build lib-grpc- grpc/src grpc/pom.xml
