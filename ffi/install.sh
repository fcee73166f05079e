#!/bin/sh
# Install xpushmem's C libraries, headers, pkg-config files and launcher binaries:
#   PREFIX=/opt/xpushmem ffi/install.sh
# Layout:
#   $PREFIX/lib/libxpushmem.{so,a}          native C API        (pkg-config: xpushmem)
#   $PREFIX/lib/libxpushmem_oshmem.{so,a}   OpenSHMEM 1.5 names (pkg-config: xpushmem-oshmem)
#   $PREFIX/include/xpushmem.h
#   $PREFIX/include/xpushmem_ops.h          (PyTorch op family, xpushmem_ops_*)
#   $PREFIX/include/xpushmem/shmem.h        (under xpushmem/, so it never shadows a system OpenSHMEM)
#   $PREFIX/include/xpushmem/pshmem.h       (the profiling interface, pshmem_*)
#   $PREFIX/lib/xpushmem/libxpushmem_device-<version>.{bc,spv}   the device library (pkg-config: devicelibdir)
#   $PREFIX/lib/xpushmem/link.sh            links a kernel's bitcode with it, refusing undefined xpushmem symbols
#   $PREFIX/lib/xpushmem/spirv-link.sh      links a kernel's SPIR-V with its SPIR-V (the state global kept)
#   $PREFIX/include/xpushmem/xpushmem_device.h, xpushmem_device_abi.h   its header (OpenCL C kernels)
#   $PREFIX/lib/pkgconfig/xpushmem.pc, xpushmem-oshmem.pc
#   $PREFIX/bin/xpushmem-run, xpushmem-info
#   $PREFIX/bin/xpushmem-oshcc, xpushmem-oshc++ compile and link an OpenSHMEM program against libxpushmem_oshmem
#   $PREFIX/bin/xpushmem-oshrun                 runs it: oshrun's options (-np/-n N, -x VAR[=VALUE], ...) on xpushmem-run
#   $PREFIX/lib/cmake/xpushmem/xpushmemConfig.cmake, xpushmemConfigVersion.cmake   find_package(xpushmem)
# XPUSHMEM_OSH_PLAIN_NAMES=1 also installs the plain names oshcc, oshc++, oshCC and oshrun (links to the above); off
# by default, so a system OpenSHMEM's oshcc/oshrun earlier or later on PATH is never shadowed by accident.
# By default it builds the release libraries first (cargo build --release). BUILD_DIR=target/debug installs what
# is already built there instead (the tests do this); XPUSHMEM_INSTALL_BINS=if-present skips missing binaries.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${PREFIX:-/usr/local}
if [ -z "${BUILD_DIR:-}" ]; then
    (cd "$ROOT" && cargo build --release -p xpushmem-ffi -p xpushmem-oshmem -p xpushmem --lib --bins)
    BUILD_DIR=${CARGO_TARGET_DIR:-$ROOT/target}/release
fi
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n 1)
mkdir -p "$PREFIX/lib/pkgconfig" "$PREFIX/include/xpushmem" "$PREFIX/bin"
for f in libxpushmem.so libxpushmem.a libxpushmem_oshmem.so libxpushmem_oshmem.a; do
    if [ ! -f "$BUILD_DIR/$f" ]; then
        echo "install.sh: $BUILD_DIR/$f is missing (build xpushmem-ffi and xpushmem-oshmem first)" >&2
        exit 1
    fi
    cp "$BUILD_DIR/$f" "$PREFIX/lib/$f.tmp" && mv "$PREFIX/lib/$f.tmp" "$PREFIX/lib/$f"
done
cp "$ROOT/ffi/include/xpushmem.h" "$PREFIX/include/xpushmem.h"
cp "$ROOT/ffi/include/xpushmem_ops.h" "$PREFIX/include/xpushmem_ops.h"
cp "$ROOT/ffi/oshmem/include/shmem.h" "$PREFIX/include/xpushmem/shmem.h"
cp "$ROOT/ffi/oshmem/include/pshmem.h" "$PREFIX/include/xpushmem/pshmem.h"
# The device library (committed prebuilt, checked against its source by the test suite) and its headers.
mkdir -p "$PREFIX/lib/xpushmem"
for ext in bc spv; do
    cp "$ROOT/shmem/device-lib/prebuilt/libxpushmem_device-$VERSION.$ext" "$PREFIX/lib/xpushmem/"
done
cp "$ROOT/shmem/device-lib/link.sh" "$PREFIX/lib/xpushmem/link.sh"
cp "$ROOT/shmem/device-lib/spirv-link.sh" "$PREFIX/lib/xpushmem/spirv-link.sh"
cp "$ROOT/shmem/device-lib/include/xpushmem_device.h" "$ROOT/shmem/device-lib/include/xpushmem_device_abi.h" \
    "$PREFIX/include/xpushmem/"
for b in xpushmem-run xpushmem-info; do
    if [ -f "$BUILD_DIR/$b" ]; then
        cp "$BUILD_DIR/$b" "$PREFIX/bin/$b.tmp" && mv "$PREFIX/bin/$b.tmp" "$PREFIX/bin/$b"
    elif [ "${XPUSHMEM_INSTALL_BINS:-}" != "if-present" ]; then
        echo "install.sh: $BUILD_DIR/$b is missing (cargo build -p xpushmem -p xpushmem-launch --bins)" >&2
        exit 1
    fi
done
# The OpenSHMEM compiler wrappers and launcher (oshcc/oshc++/oshrun, as Open MPI and Sandia OpenSHMEM ship them).
write_oshcc() { # $1 = file name, $2 = default compiler, $3 = variable naming another compiler
    cat > "$PREFIX/bin/$1.tmp" <<SH
#!/bin/sh
# $1 (installed by xpushmem's ffi/install.sh): compiles and links an OpenSHMEM program against xpushmem's
# libxpushmem_oshmem: $1 prog.c -o prog. \$$3 chooses the compiler (default: $2); --showme prints the command
# instead of running it. Compile-only runs (-c, -S, -E, -M, -MM) get no link flags.
cc=\${$3:-$2}
cflags="-I$PREFIX/include/xpushmem"
libs="-L$PREFIX/lib -Wl,-rpath,$PREFIX/lib -lxpushmem_oshmem"
link=1
show=0
for a in "\$@"; do
    case "\$a" in
    -c | -S | -E | -M | -MM) link=0 ;;
    --showme | -showme) show=1 ;;
    --showme:compile | -showme:compile) echo "\$cflags"; exit 0 ;;
    --showme:link | -showme:link) echo "\$libs"; exit 0 ;;
    esac
done
if [ "\$show" = 1 ]; then
    args=""
    for a in "\$@"; do
        case "\$a" in --showme | -showme) ;; *) args="\$args \$a" ;; esac
    done
    [ "\$link" = 1 ] || libs=""
    echo "\$cc \$cflags\$args \$libs"
    exit 0
fi
if [ "\$link" = 1 ]; then
    exec \$cc \$cflags "\$@" \$libs
fi
exec \$cc \$cflags "\$@"
SH
    chmod 755 "$PREFIX/bin/$1.tmp" && mv "$PREFIX/bin/$1.tmp" "$PREFIX/bin/$1"
}
write_oshcc xpushmem-oshcc cc XPUSHMEM_OSHCC
write_oshcc xpushmem-oshc++ c++ XPUSHMEM_OSHCXX
cat > "$PREFIX/bin/xpushmem-oshrun.tmp" <<SH
#!/bin/sh
# xpushmem-oshrun (installed by xpushmem's ffi/install.sh): runs an OpenSHMEM program under xpushmem-run with the
# options programs' scripts pass to oshrun/mpirun:
#   -np N | -n N | --np N | --n N | -c N   the number of PEs
#   -x VAR=VALUE | -x VAR                  set (or pass on) an environment variable for every PE
#   --timeout S                            xpushmem-run's hard time limit; --no-prefix: output without [PE] tags
#   --oversubscribe, --allow-run-as-root, --bind-to X, --map-by X, --mca K V, --host H: accepted, nothing to do
#     for xpushmem-run on one machine
# Anything else starting with - before the program is an error naming it.
usage="usage: xpushmem-oshrun -np N [-x VAR[=VALUE]] [--timeout S] [--no-prefix] PROGRAM [ARGS...]"
np=""
opts=""
while [ \$# -gt 0 ]; do
    case "\$1" in
    -np | -n | --np | --n | -c)
        [ \$# -ge 2 ] || { echo "xpushmem-oshrun: \$1 needs a number" >&2; echo "\$usage" >&2; exit 2; }
        np=\$2; shift 2 ;;
    -np=* | --np=* | --n=*) np=\${1#*=}; shift ;;
    -x)
        [ \$# -ge 2 ] || { echo "xpushmem-oshrun: -x needs VAR or VAR=VALUE" >&2; exit 2; }
        export "\$2"
        shift 2 ;;
    --timeout | -t)
        [ \$# -ge 2 ] || { echo "xpushmem-oshrun: \$1 needs seconds" >&2; exit 2; }
        opts="\$opts --timeout \$2"; shift 2 ;;
    --no-prefix) opts="\$opts --no-prefix"; shift ;;
    --oversubscribe | --allow-run-as-root) shift ;;
    --bind-to | --map-by | --host | -H | --hostfile | -hostfile) shift 2 ;;
    --mca | -mca) shift 3 ;;
    -h | --help) echo "\$usage"; exit 0 ;;
    --) shift; break ;;
    -*) echo "xpushmem-oshrun: unknown option \$1" >&2; echo "\$usage" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ -n "\$np" ] || { echo "xpushmem-oshrun: the number of PEs is missing (-np N)" >&2; echo "\$usage" >&2; exit 2; }
[ \$# -ge 1 ] || { echo "xpushmem-oshrun: the program is missing" >&2; echo "\$usage" >&2; exit 2; }
exec "$PREFIX/bin/xpushmem-run" -n "\$np" \$opts "\$@"
SH
chmod 755 "$PREFIX/bin/xpushmem-oshrun.tmp" && mv "$PREFIX/bin/xpushmem-oshrun.tmp" "$PREFIX/bin/xpushmem-oshrun"
if [ "${XPUSHMEM_OSH_PLAIN_NAMES:-0}" = 1 ]; then
    for n in oshcc:xpushmem-oshcc oshc++:xpushmem-oshc++ oshCC:xpushmem-oshc++ oshrun:xpushmem-oshrun; do
        ln -sf "${n#*:}" "$PREFIX/bin/${n%%:*}"
    done
fi
# CMake: find_package(xpushmem) (templates in ffi/cmake/; the config finds the prefix from its own location).
mkdir -p "$PREFIX/lib/cmake/xpushmem"
for f in xpushmemConfig xpushmemConfigVersion; do
    sed "s/@VERSION@/$VERSION/g" "$ROOT/ffi/cmake/$f.cmake.in" > "$PREFIX/lib/cmake/xpushmem/$f.cmake"
done
# Libraries a static link needs besides libxpushmem.a (rustc --print native-static-libs on Linux/glibc).
STATIC_LIBS="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
cat > "$PREFIX/lib/pkgconfig/xpushmem.pc" <<PC
prefix=$PREFIX
libdir=\${prefix}/lib
includedir=\${prefix}/include
devicelibdir=\${libdir}/xpushmem
devicelib=\${devicelibdir}/libxpushmem_device-$VERSION.bc
deviceincludedir=\${includedir}/xpushmem

Name: xpushmem
Description: xpushmem PGAS library: native C API (xpushmem_*)
Version: $VERSION
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lxpushmem
Libs.private: $STATIC_LIBS
PC
cat > "$PREFIX/lib/pkgconfig/xpushmem-oshmem.pc" <<PC
prefix=$PREFIX
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: xpushmem-oshmem
Description: xpushmem PGAS library: OpenSHMEM 1.5 interface (shmem.h, shmem_*)
Version: $VERSION
Cflags: -I\${includedir}/xpushmem
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lxpushmem_oshmem
Libs.private: $STATIC_LIBS
PC
echo "installed xpushmem $VERSION into $PREFIX"
