//! The runtime's layers, checked: every file of `shmem/src` belongs to one layer by its path ([`LAYERS`]), and
//! a file may name (`use crate::...`, a `crate::x::` path, a `super::` path that leaves its module) only files of
//! its own layer or of lower ones; `unsafe` code may appear only in the platform layer ([`UNSAFE_HOMES`]).
//!
//! There is no list of exceptions: a file that imports upward, or holds unsafe code outside the platform layer, fails,
//! and so does an import cycle between the files of any crate of the workspace. `docs/ARCHITECTURE.md` draws the
//! layers.
//!
//! Std only, no build dependency: the scan reads the sources as text (comments and `#[cfg(test)] mod tests`
//! skipped; the crate root's `pub use` re-exports resolved to the module they come from).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first.
const LAYER_NAMES: &[&str] = &[
    "leaves", // 0: std only, and each other downward (abi, error, types, algo, config, wait, job)
    "platform", // 1: sys/, hal/, net/: the only unsafe of the runtime
    "bootstrap", // 2
    "transport", // 3
    "core",   // 4: one PE's engine (core/, rma, amo, sync, symaddr, heap)
    "team",   // 5
    "coll",   // 6
    "facade", // 7: init (lifecycle), Device, the launcher, the crate root and its old `runtime` paths
    "bin",    // 8
];

/// Each source path (relative to `shmem/src`, a file or a folder ending in `/`) and its layer; the longest
/// matching entry wins. Leaves carry a rank within their layer: a leaf names only leaves of a lower rank.
const LAYERS: &[(&str, usize, usize)] = &[
    // (path, layer, rank inside the layer)
    ("abi.rs", 0, 0),
    ("error.rs", 0, 1),
    ("types.rs", 0, 2),
    ("algo.rs", 0, 3),
    ("config.rs", 0, 4),
    ("wait.rs", 0, 5),
    ("job.rs", 0, 5),
    ("sys/", 1, 0),
    ("hal/", 1, 0),
    ("net/", 1, 0),
    ("bootstrap/", 2, 0),
    ("transport/", 3, 0),
    ("core/", 4, 0),
    ("runtime.rs", 7, 0),
    ("team/", 5, 0),
    ("coll/", 6, 0),
    ("device/", 7, 0),
    ("init.rs", 7, 0),
    ("lib.rs", 7, 0),
    ("bin/", 8, 0),
];

/// The files that may hold `unsafe` code (a folder ends in `/`): the platform layer. Elsewhere a file may only
/// declare an `unsafe fn` (a contract its caller takes on) and, inside its body, call what that contract covers:
/// a facade forwarding its caller's promise to the platform layer (`Device::launch` to `hal/ze`) adds no unsafe
/// code of its own. An `unsafe` block outside such a body, an `unsafe impl` or `unsafe extern` is refused.
const UNSAFE_HOMES: &[&str] = &["sys/", "hal/", "net/"];

/// Foreign-function crates and the only folder of `shmem/src` that may name each (a `use` or a path): the
/// libfabric bindings are the platform layer's `net/` alone.
const FFI_HOMES: &[(&str, &str)] = &[("fabric_sys", "net/")];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The path of `file` relative to the runtime's `src`, with `/`.
fn rel(file: &Path) -> String {
    rel_to(&src(), file)
}

/// The path of `file` relative to `base`, with `/`.
fn rel_to(base: &Path, file: &Path) -> String {
    file.strip_prefix(base)
        .expect("under src")
        .to_string_lossy()
        .replace('\\', "/")
}

/// (layer, rank) of a file, by the longest matching entry of [`LAYERS`].
fn layer_of(rel: &str) -> Option<(usize, usize)> {
    LAYERS
        .iter()
        .filter(|(p, _, _)| {
            if p.ends_with('/') {
                rel.starts_with(p)
            } else {
                rel == *p
            }
        })
        .max_by_key(|(p, _, _)| p.len())
        .map(|&(_, l, r)| (l, r))
}

/// The code of a file: comments removed, and the unit tests (`#[cfg(test)]` followed by `mod tests`) cut off.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    let mut in_block = false;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]")
            && lines[i + 1..]
                .iter()
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| l.trim_start().starts_with("mod tests"))
        {
            break;
        }
        let mut s = line.to_string();
        if in_block {
            match s.find("*/") {
                Some(e) => {
                    s = s[e + 2..].to_string();
                    in_block = false;
                }
                None => {
                    i += 1;
                    continue;
                }
            }
        }
        if let Some(b) = s.find("/*") {
            match s[b..].find("*/") {
                Some(e) => s.replace_range(b..b + e + 2, ""),
                None => {
                    s.truncate(b);
                    in_block = true;
                }
            }
        }
        // A line comment outside a string literal (an even number of quotes before it).
        let mut quotes = 0;
        let bytes = s.as_bytes();
        let mut cut = None;
        for k in 0..bytes.len() {
            if bytes[k] == b'"' && (k == 0 || bytes[k - 1] != b'\\') {
                quotes += 1;
            }
            if quotes % 2 == 0 && bytes[k] == b'/' && bytes.get(k + 1) == Some(&b'/') {
                cut = Some(k);
                break;
            }
        }
        if let Some(c) = cut {
            s.truncate(c);
        }
        out.push_str(&s);
        out.push('\n');
        i += 1;
    }
    out
}

/// The module path of a file (`transport/ze.rs` -> `["transport", "ze"]`, `team/mod.rs` -> `["team"]`).
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod") | Some("lib") | Some("main")
    ) {
        parts.pop();
    }
    if parts.first().map(String::as_str) == Some("bin") {
        return Vec::new();
    }
    parts
}

/// The file that defines the longest existing prefix of a module path.
fn file_of(path: &[String], files: &BTreeSet<String>) -> Option<String> {
    for n in (0..=path.len()).rev() {
        let p = path[..n].join("/");
        if n == 0 {
            return ["lib.rs", "main.rs"]
                .into_iter()
                .find(|r| files.contains(*r))
                .map(String::from);
        }
        for cand in [format!("{p}.rs"), format!("{p}/mod.rs")] {
            if files.contains(&cand) {
                return Some(cand);
            }
        }
    }
    None
}

/// The names the crate root re-exports (`pub use a::b::{X, Y}` in lib.rs) and the module each comes from.
fn root_reexports(lib: &str) -> BTreeMap<String, Vec<String>> {
    let mut map = BTreeMap::new();
    let code = code_of(lib);
    for stmt in code.split(';') {
        let s = stmt.trim();
        let Some(body) = s.strip_prefix("pub use ") else {
            continue;
        };
        let body: String = body.split_whitespace().collect();
        let (base, names) = match body.find("::{") {
            Some(k) => (
                &body[..k],
                body[k + 3..]
                    .trim_end_matches('}')
                    .split(',')
                    .map(String::from)
                    .collect::<Vec<_>>(),
            ),
            None => match body.rfind("::") {
                Some(k) => (&body[..k], vec![body[k + 2..].to_string()]),
                None => continue,
            },
        };
        let base: Vec<String> = base
            .split("::")
            .filter(|s| *s != "crate")
            .map(String::from)
            .collect();
        for n in names.into_iter().filter(|n| !n.is_empty()) {
            map.insert(n, base.clone());
        }
    }
    map
}

/// `path` with a leading name the crate root re-exports replaced by the module it comes from, followed through
/// re-exports of re-exports (`pub use rma::Pending` after `pub use crate::core::rma`).
fn through_reexports(mut path: Vec<String>, root: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    for _ in 0..4 {
        match path.first().and_then(|n| root.get(n)) {
            Some(m) => path = m.iter().cloned().chain(path).collect(),
            None => break,
        }
    }
    path
}

/// Every module path a file names: `crate::a::b`, `use crate::{a::b, c}` groups, and `super::` paths (resolved
/// against the file's own module).
fn references(code: &str, me: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if !code.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let at_word = i == 0 || !(ident(b[i - 1]) || b[i - 1] == b'$');
        let rest = &code[i..];
        let (base, skip) = if at_word && rest.starts_with("crate::") {
            (Vec::new(), "crate::".len())
        } else if at_word && rest.starts_with("super::") {
            // A file's `super` is its parent module (a mod.rs is its own module, so its parent too).
            let mut m = me.to_vec();
            let mut k = 0;
            while code[i + k..].starts_with("super::") {
                m.pop();
                k += "super::".len();
            }
            (m, k)
        } else {
            i += 1;
            continue;
        };
        i += skip;
        let mut path = base;
        loop {
            let start = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            path.push(code[start..i].to_string());
            if code[i..].starts_with("::") && code[i + 2..].bytes().next().is_some_and(ident) {
                i += 2;
            } else {
                break;
            }
        }
        path.retain(|s| !s.is_empty());
        let group = if code[i..].starts_with("::{") {
            Some(i + 3)
        } else if path.is_empty() && code[i..].starts_with('{') {
            Some(i + 1)
        } else {
            None
        };
        if let Some(g) = group {
            // A group: each entry's leading path (one level of nesting is enough for the layer map).
            let end = code[g..].find('}').map_or(code.len(), |e| g + e);
            for item in code[g..end].split(',') {
                let item: String = item.split_whitespace().collect();
                let sub: Vec<String> = item
                    .split("::")
                    .take_while(|s| !s.is_empty() && s.bytes().all(ident))
                    .map(String::from)
                    .collect();
                if !sub.is_empty() {
                    out.push(path.iter().cloned().chain(sub).collect());
                }
            }
            i = end;
            continue;
        }
        out.push(path);
    }
    out
}

/// The code with string and character literals blanked out (braces and words inside them are not code).
fn without_literals(code: &str) -> String {
    let b = code.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let word_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if c == b'r' && !word_before && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) {
            // r"..." or r#"..."#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) == Some(&b'"') {
                let mut close = vec![b'"'];
                close.extend(std::iter::repeat_n(b'#', hashes));
                let end = b[j + 1..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |e| j + 1 + e + close.len());
                out.push(b' ');
                i = end;
                continue;
            }
        }
        if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push(b' ');
            i = j + 1;
            continue;
        }
        if c == b'\'' {
            // A character literal ('x', '\n', '\u{7f}'); otherwise a lifetime, kept.
            if b.get(i + 1) == Some(&b'\\') {
                let end = b[i + 2..]
                    .iter()
                    .position(|&x| x == b'\'')
                    .map_or(b.len(), |e| i + 2 + e + 1);
                out.push(b' ');
                i = end;
                continue;
            }
            if b.get(i + 2) == Some(&b'\'') {
                out.push(b' ');
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the code holds `unsafe` of its own: an `unsafe impl` or `unsafe extern`, or an `unsafe` block that is
/// not inside the body of an `unsafe fn` (whose body only forwards the contract its caller took on).
fn has_own_unsafe(code: &str) -> bool {
    let text = without_literals(code);
    let b = text.as_bytes();
    let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut depth = 0usize;
    // Depths at which the bodies of the unsafe fns we are in opened.
    let mut bodies: Vec<usize> = Vec::new();
    let mut pending_fn = false;
    // Nesting of `(` and `[` since the pending `unsafe fn`: a `;` inside them (an array type `[u32; 3]` in its
    // parameters) does not end the declaration.
    let mut parens = 0usize;
    let mut i = 0;
    while i < b.len() {
        let word_start = i == 0 || !is_word(b[i - 1]);
        if word_start
            && text[i..].starts_with("unsafe")
            && !b.get(i + 6).is_some_and(|&c| is_word(c))
        {
            let after = text[i + 6..].trim_start();
            let next: String = after
                .bytes()
                .take_while(|&c| is_word(c))
                .map(char::from)
                .collect();
            match next.as_str() {
                "fn" => {
                    pending_fn = true;
                    parens = 0;
                }
                "impl" | "extern" => return true,
                _ if after.starts_with('{') && bodies.is_empty() => return true,
                _ => {}
            }
            i += 6;
            continue;
        }
        match b[i] {
            b'{' => {
                depth += 1;
                if pending_fn {
                    bodies.push(depth);
                    pending_fn = false;
                }
            }
            b'}' => {
                if bodies.last() == Some(&depth) {
                    bodies.pop();
                }
                depth = depth.saturating_sub(1);
            }
            b'(' | b'[' if pending_fn => parens += 1,
            b')' | b']' if pending_fn => parens = parens.saturating_sub(1),
            // A declaration without a body (in a trait).
            b';' if parens == 0 => pending_fn = false,
            _ => {}
        }
        i += 1;
    }
    false
}

struct Scan {
    /// (from file, to file) for every upward edge.
    upward: BTreeSet<(String, String)>,
    /// Files outside [`UNSAFE_HOMES`] with `unsafe` code.
    unsafe_outside: BTreeSet<String>,
    /// Files no entry of [`LAYERS`] places.
    unplaced: Vec<String>,
}

fn scan() -> Scan {
    let mut paths = Vec::new();
    rust_files(&src(), &mut paths);
    let files: BTreeSet<String> = paths.iter().map(|p| rel(p)).collect();
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let root = root_reexports(&lib);
    let mut s = Scan {
        upward: BTreeSet::new(),
        unsafe_outside: BTreeSet::new(),
        unplaced: Vec::new(),
    };
    for p in &paths {
        let from = rel(p);
        let Some(lf) = layer_of(&from) else {
            s.unplaced.push(from);
            continue;
        };
        let code = code_of(&std::fs::read_to_string(p).expect("read source"));
        if has_own_unsafe(&code) && !UNSAFE_HOMES.iter().any(|h| from.starts_with(h)) {
            s.unsafe_outside.insert(from.clone());
        }
        if from == "lib.rs" {
            continue; // the root re-exports every layer
        }
        let me = module_of(&from);
        for path in references(&code, &me) {
            let path = through_reexports(path, &root);
            let Some(to) = file_of(&path, &files) else {
                continue;
            };
            if to == from {
                continue;
            }
            let Some(lt) = layer_of(&to) else { continue };
            if lt > lf {
                s.upward.insert((from.clone(), to));
            }
        }
    }
    s
}

/// Every import between two files of the crate whose sources are under `src` (`crate::` and `super::` paths, names
/// the crate root re-exports resolved to their module); binaries under `src/bin/` are crates of their own and left
/// out.
fn file_edges(src: &Path) -> BTreeSet<(String, String)> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let rel = |p: &Path| rel_to(src, p);
    paths.retain(|p| !rel(p).starts_with("bin/"));
    let files: BTreeSet<String> = paths.iter().map(|p| rel(p)).collect();
    let root = ["lib.rs", "main.rs"]
        .iter()
        .find_map(|r| std::fs::read_to_string(src.join(r)).ok())
        .map(|lib| root_reexports(&lib))
        .unwrap_or_default();
    let mut edges = BTreeSet::new();
    for p in &paths {
        let from = rel(p);
        if from == "lib.rs" || from == "main.rs" {
            continue; // the root declares and re-exports every module
        }
        let code = code_of(&std::fs::read_to_string(p).expect("read source"));
        for path in references(&code, &module_of(&from)) {
            let path = through_reexports(path, &root);
            if let Some(to) = file_of(&path, &files) {
                if to != from && to != "lib.rs" && to != "main.rs" {
                    edges.insert((from.clone(), to));
                }
            }
        }
    }
    edges
}

/// The import cycles of a graph: its strongly connected components of more than one file (Tarjan), each sorted.
fn cycles(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let mut nodes: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        nodes.entry(a).or_default().push(b);
        nodes.entry(b).or_default();
    }
    struct Tarjan<'a> {
        next: usize,
        index: BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(v: &'a str, g: &BTreeMap<&'a str, Vec<&'a str>>, t: &mut Tarjan<'a>) {
        t.index.insert(v, (t.next, t.next));
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        for &w in &g[v] {
            if !t.index.contains_key(w) {
                visit(w, g, t);
                let low = t.index[v].1.min(t.index[w].1);
                t.index.get_mut(v).expect("visited").1 = low;
            } else if t.on.contains(w) {
                let low = t.index[v].1.min(t.index[w].0);
                t.index.get_mut(v).expect("visited").1 = low;
            }
        }
        if t.index[v].0 == t.index[v].1 {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = Tarjan {
        next: 0,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in nodes.keys() {
        if !t.index.contains_key(v) {
            visit(v, &nodes, &mut t);
        }
    }
    t.out
}

/// The workspace's crates with Rust sources: `(member folder, its src)`, from the workspace's `Cargo.toml`.
fn workspace_crates() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("workspace Cargo.toml");
    let members = manifest
        .split("members")
        .nth(1)
        .and_then(|m| m.split('[').nth(1))
        .and_then(|m| m.split(']').next())
        .expect("a members list");
    members
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .map(|m| {
            let src = root.join(&m).join("src");
            (m, src)
        })
        .filter(|(_, src)| src.is_dir())
        .collect()
}

#[test]
fn every_file_has_a_layer() {
    let s = scan();
    assert!(
        s.unplaced.is_empty(),
        "files without a layer in LAYERS: {:?}",
        s.unplaced
    );
}

#[test]
fn imports_go_down_only() {
    let s = scan();
    let name = |f: &str| layer_of(f).map_or("?", |(l, _)| LAYER_NAMES[l]);
    let up: Vec<String> = s
        .upward
        .iter()
        .map(|(a, b)| format!("{a} ({}) -> {b} ({})", name(a), name(b)))
        .collect();
    assert!(
        up.is_empty(),
        "upward imports (a file may name only its own layer and lower ones; see docs/ARCHITECTURE.md):\n  {}",
        up.join("\n  ")
    );
}

#[test]
fn unsafe_lives_in_the_platform_layer() {
    let s = scan();
    assert!(
        s.unsafe_outside.is_empty(),
        "unsafe code outside the platform layer ({UNSAFE_HOMES:?}): {:?}",
        s.unsafe_outside
    );
}

#[test]
fn only_net_names_the_libfabric_bindings() {
    let mut paths = Vec::new();
    rust_files(&src(), &mut paths);
    let mut outside = Vec::new();
    for p in &paths {
        let from = rel(p);
        let code = without_literals(&code_of(&std::fs::read_to_string(p).expect("read source")));
        for (krate, home) in FFI_HOMES {
            let named = code.match_indices(krate).any(|(i, _)| {
                let before = code[..i].chars().next_back();
                let after = code[i + krate.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if named && !from.starts_with(home) {
                outside.push(format!("{from} names {krate} (only {home} may)"));
            }
        }
    }
    assert!(outside.is_empty(), "{}", outside.join("\n"));
}

/// The unsafe check itself: forwarding inside an `unsafe fn` is not own unsafe; a block elsewhere, an impl, and
/// braces inside literals are told apart.
#[test]
fn the_unsafe_check_tells_forwarding_from_own_unsafe() {
    let fwd = "pub unsafe fn launch(&self) -> R { let s = \"}{x}\"; unsafe { self.rt.launch() } }";
    assert!(!has_own_unsafe(&code_of(fwd)));
    let own = "pub fn launch(&self) -> R { unsafe { self.rt.launch() } }";
    assert!(has_own_unsafe(&code_of(own)));
    let after = "unsafe fn a() { unsafe { b() } }\nfn c() { let ch = '}'; unsafe { d() } }";
    assert!(has_own_unsafe(&code_of(after)));
    assert!(has_own_unsafe(&code_of("unsafe impl Send for X {}")));
    assert!(!has_own_unsafe(&code_of("// unsafe { x }\nfn f() {}")));
    assert!(!has_own_unsafe(&code_of(
        "trait T { unsafe fn f(); }\nfn g() {}"
    )));
    // An array type in the parameters does not end the declaration.
    let arr = "pub unsafe fn launch(&self, g: [u32; 3]) -> R { unsafe { self.rt.launch(g) } }";
    assert!(!has_own_unsafe(&code_of(arr)));
    assert!(has_own_unsafe(&code_of(
        "trait T { unsafe fn f(g: [u8; 2]); }\nfn g() { unsafe { h() } }"
    )));
}

/// The scanner itself: a reference of each form is found and resolved.
#[test]
fn the_scanner_sees_every_form_of_reference() {
    let code = code_of(
        "use crate::team::{Team, ctx::Ctx};\nuse super::shm::Arena; // crate::coll\nfn f() { crate::runtime::Shmem::x(); }\n/* crate::device */\n",
    );
    let refs = references(&code, &["transport".into(), "ze".into()]);
    let want: Vec<Vec<String>> = [
        vec!["team", "Team"],
        vec!["team", "ctx", "Ctx"],
        vec!["transport", "shm", "Arena"],
        vec!["runtime", "Shmem", "x"],
    ]
    .iter()
    .map(|v| v.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(refs, want);
}

/// No two files of the runtime import each other, directly or round a loop.
#[test]
fn the_runtime_has_no_import_cycle() {
    let found = cycles(&file_edges(&src()));
    assert!(found.is_empty(), "import cycles in shmem/src: {found:?}");
}

/// No crate of the workspace has an import cycle between its files (what `cargo modules` would draw, checked here
/// from the sources).
#[test]
fn no_crate_has_an_import_cycle() {
    let crates = workspace_crates();
    assert!(
        crates.iter().any(|(m, _)| m == "shmem") && crates.len() >= 8,
        "the workspace's members were not read: {crates:?}"
    );
    let found: Vec<String> = crates
        .iter()
        .filter(|(m, _)| m != "shmem")
        .flat_map(|(m, src)| {
            cycles(&file_edges(src))
                .into_iter()
                .map(move |c| format!("{m}: {}", c.join(" <-> ")))
        })
        .collect();
    assert!(found.is_empty(), "import cycles:\n  {}", found.join("\n  "));
}

/// The cycle finder itself: a loop of three and a pair are found, a chain and a diamond are not.
#[test]
fn the_cycle_finder_finds_loops_only() {
    let g = |e: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        e.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert!(cycles(&g(&[("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")])).is_empty());
    let found = cycles(&g(&[
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "d"),
        ("d", "e"),
        ("e", "d"),
    ]));
    let want: Vec<Vec<String>> = vec![
        vec!["d".into(), "e".into()],
        vec!["a".into(), "b".into(), "c".into()],
    ];
    let mut found = found;
    found.sort();
    let mut want = want;
    want.sort();
    assert_eq!(found, want);
}
