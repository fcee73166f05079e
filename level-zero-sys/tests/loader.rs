//! Loader tests: a missing library names every path tried; the system loader (if installed) resolves.

use level_zero_sys::{LoadError, ZeApi};

#[test]
fn missing_loader_lists_the_path_tried() {
    let err = ZeApi::load_from("/nonexistent/libze_loader.so.1").unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, LoadError::NotFound { ref tried } if tried.len() == 1),
        "{msg}"
    );
    assert!(msg.contains("/nonexistent/libze_loader.so.1"), "{msg}");
}

#[test]
fn system_loader_resolves_all_1_4_entry_points() {
    match ZeApi::load() {
        Ok(api) => {
            assert!(api
                .library_path()
                .to_string_lossy()
                .contains("libze_loader"));
            eprintln!("{api:?}");
        }
        Err(LoadError::NotFound { tried }) => {
            // Both names must have been tried before giving up.
            assert_eq!(tried.len(), 2, "{tried:?}");
            eprintln!(
                "skipped: no Level Zero loader installed (run scripts/setup-device.sh): {tried:?}"
            );
        }
        Err(e) => panic!("{e}"),
    }
}
