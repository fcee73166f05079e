//! Where the device library (`libxpushmem_device-<version>.bc` and `.spv`, which kernels are linked with) is:
//! installed by `ffi/install.sh` under `$PREFIX/lib/xpushmem/` beside `$PREFIX/bin/`, or prebuilt in the source
//! tree this crate was built from (`shmem/device-lib/prebuilt/`).

use std::path::{Path, PathBuf};

/// File name of this version's device library bitcode (`libxpushmem_device-<version>.bc`).
pub fn bitcode_name() -> String {
    format!("libxpushmem_device-{}.bc", crate::VERSION)
}

/// The source tree's prebuilt device library directory, as it was when this crate was built.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("device-lib/prebuilt")
}

/// The directory `ffi/install.sh` puts the device library in for a program installed as `exe`
/// (`$PREFIX/bin/NAME` → `$PREFIX/lib/xpushmem`); `None` when `exe` has no grandparent.
pub fn installed_dir(exe: &Path) -> Option<PathBuf> {
    Some(exe.parent()?.parent()?.join("lib/xpushmem"))
}

/// The device library bitcode files that exist, installed one (relative to `exe`) first, then the source tree's.
pub fn find(exe: Option<&Path>) -> Vec<PathBuf> {
    let name = bitcode_name();
    exe.and_then(installed_dir)
        .into_iter()
        .chain([source_dir()])
        .map(|d| d.join(&name))
        .filter(|p| p.is_file())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_installed_and_prebuilt_library() {
        let prebuilt = source_dir().join(bitcode_name());
        assert!(
            prebuilt.is_file(),
            "{} (committed in the source tree)",
            prebuilt.display()
        );
        // No install beside this exe: only the source tree's.
        let none = std::env::temp_dir().join(format!("xpushmem-lib-none-{}", std::process::id()));
        assert_eq!(
            find(Some(&none.join("bin/xpushmem-info"))),
            vec![prebuilt.clone()]
        );
        assert_eq!(find(None), vec![prebuilt.clone()]);
        // An install laid out as ffi/install.sh does: found first.
        let prefix = std::env::temp_dir().join(format!("xpushmem-lib-test-{}", std::process::id()));
        let lib = prefix.join("lib/xpushmem");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join(bitcode_name()), b"BC").unwrap();
        let exe = prefix.join("bin/xpushmem-info");
        let found = find(Some(&exe));
        std::fs::remove_dir_all(&prefix).unwrap();
        assert_eq!(found, vec![lib.join(bitcode_name()), prebuilt]);
        assert_eq!(installed_dir(Path::new("xpushmem-info")), None);
    }
}
