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
