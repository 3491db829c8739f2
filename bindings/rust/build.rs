// build.rs — compiles roost's prefixed library from roost's C++ sources and
// generates the Rust mirror of `struct roost_stats`.
//
// Owns: reading roost's top-level CMakeLists.txt for the source list
// (ROOST_CORE_SOURCES), the library flags (ROOST_LIB_FLAGS, with the Release
// additions) and the C++ standard, so the crate builds what CMake builds;
// reading include/roost_stats.def for the counters.  Must never: compile the
// override sources (src/api/override_*.cc: the crate must leave the
// process's malloc alone), keep a list of its own that could drift from
// CMake's, read anything outside the crate's folder but through roost/'s
// links, or link libstdc++.
//
// Where the sources come from: `roost/` in the crate holds three symbolic
// links, committed as links, never as copies: `roost/CMakeLists.txt`,
// `roost/src` and `roost/include`, to the repository's own.  So one tree
// serves every way the crate is built: in the repository, as a path or git
// dependency (git checks the links out as links), and from the `.crate`
// file, into which `cargo package` copies the files behind the links as
// plain files (rustup's cargo and Debian's 1.65 both do; the ctest
// rust.package builds and tests such a `.crate` away from the repository).
// Rejected: a step that copies the sources into the crate before `cargo
// package` (a second step to remember, and copies left behind when it
// stops half-way), and a copy committed to git (a second list that drifts).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    // roost's tree as the crate sees it: the links of roost/ (see above).
    let root = manifest.join("roost");
    if !root.join("src").is_dir() || !root.join("include").is_dir() {
        panic!(
            "{}: src and include must be roost's folders (symbolic links into the repository, \
             or the files `cargo package` copied); a checkout that turned the links into \
             text files (git's core.symlinks=false) cannot build the crate",
            root.display()
        );
    }
    let cmake_path = root.join("CMakeLists.txt");
    let def_path = root.join("include/roost_stats.def");

    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "linux" {
        panic!("roost supports Linux only (target OS here: {:?})", os);
    }

    let cmake = read(&cmake_path);
    let sources = cmake_list(&cmake, "set(ROOST_CORE_SOURCES");
    let mut flags = vec![cxx_standard(&cmake)];
    flags.extend(cmake_list(&cmake, "set(ROOST_LIB_FLAGS"));
    // The Release tree's additions (`list(APPEND ROOST_LIB_FLAGS ...)` under
    // `if(CMAKE_BUILD_TYPE STREQUAL "Release")`): the crate is always built
    // as roost's Release library, whatever cargo's profile.
    flags.extend(cmake_list(&cmake, "list(APPEND ROOST_LIB_FLAGS"));

    for s in &sources {
        if s.contains("override_") {
            panic!("ROOST_CORE_SOURCES names an override source ({}): the crate must not replace malloc", s);
        }
    }

    let mut build = cc::Build::new();
    build
        .cpp(true)
        // roost is built -fno-exceptions -fno-rtti -fno-threadsafe-statics:
        // it needs no libstdc++ (CMake links libroost.so with the C driver).
        .cpp_link_stdlib(None)
        // The warning flags come from ROOST_LIB_FLAGS.
        .warnings(false)
        .include(root.join("include"))
        .include(root.join("src"));
    for f in &flags {
        build.flag(f);
    }
    for s in &sources {
        let path = root.join(s);
        if !path.is_file() {
            panic!(
                "{} (listed in ROOST_CORE_SOURCES) does not exist",
                path.display()
            );
        }
        build.file(path);
    }
    build.compile("roost");
    println!("cargo:rustc-link-lib=pthread");
    // For crates that depend on this one (DEP_ROOST_INCLUDE): roost.h.
    println!("cargo:include={}", root.join("include").display());

    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let stats = stats_struct(&read(&def_path));
    fs::write(out.join("stats.rs"), stats).expect("writing stats.rs");

    // Directories are scanned whole: any header change rebuilds.  The
    // targets of roost/'s links, so that cargo never has to follow one.
    for p in [cmake_path, def_path, root.join("src"), root.join("include")] {
        let real = fs::canonicalize(&p).unwrap_or(p);
        println!("cargo:rerun-if-changed={}", real.display());
    }
}

fn read(path: &Path) -> String {
    match fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => panic!("cannot read {}: {}", path.display(), e),
    }
}

/// The words of the CMake command that starts with `opener` (up to its
/// closing parenthesis), comments removed.  Panics when the command is
/// missing or holds something the build script cannot evaluate.
fn cmake_list(cmake: &str, opener: &str) -> Vec<String> {
    let start = match cmake.find(opener) {
        Some(i) => i + opener.len(),
        None => panic!("CMakeLists.txt: `{}` not found; build.rs reads it", opener),
    };
    let mut words = Vec::new();
    let mut closed = false;
    for line in cmake[start..].lines() {
        let mut code = line.split('#').next().unwrap_or("");
        if let Some(end) = code.find(')') {
            code = &code[..end];
            closed = true;
        }
        for w in code.split_whitespace() {
            if w.contains('$') || w.contains('"') || w.contains('(') {
                panic!(
                    "CMakeLists.txt: `{}` holds `{}`, which build.rs cannot evaluate",
                    opener, w
                );
            }
            words.push(w.to_string());
        }
        if closed {
            break;
        }
    }
    if !closed {
        panic!("CMakeLists.txt: `{}` is not closed", opener);
    }
    if words.is_empty() {
        panic!("CMakeLists.txt: `{}` is empty", opener);
    }
    words
}

/// `set(CMAKE_CXX_STANDARD 20)` with extensions off: `-std=c++20`.
fn cxx_standard(cmake: &str) -> String {
    let words = cmake_list(cmake, "set(CMAKE_CXX_STANDARD ");
    format!("-std=c++{}", words[0])
}

/// `pub struct Stats`, one `u64` per `ROOST_STAT(name, source, "description")`
/// of roost_stats.def, in its order: the layout of roost.h's struct.
fn stats_struct(def: &str) -> String {
    let mut fields = Vec::new();
    for line in def.lines() {
        let rest = match line.trim_start().strip_prefix("ROOST_STAT(") {
            Some(r) => r,
            None => continue,
        };
        let mut parts = rest.splitn(3, ',');
        let name = parts.next().unwrap_or("").trim();
        let _source = parts.next();
        let desc = parts.next().unwrap_or("").trim();
        let desc = desc.strip_suffix(')').unwrap_or(desc).trim();
        let ident_ok = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        let desc_ok = desc.len() >= 2
            && desc.starts_with('"')
            && desc.ends_with('"')
            && !desc[1..desc.len() - 1].contains(['"', '\\']);
        if !ident_ok || !desc_ok {
            panic!("roost_stats.def: cannot read `{}`", line);
        }
        fields.push((name.to_string(), desc.to_string()));
    }
    if fields.is_empty() {
        panic!("roost_stats.def: no ROOST_STAT entries");
    }

    let mut s = String::new();
    s.push_str("// Generated by build.rs from include/roost_stats.def; never edit.\n\n");
    s.push_str("/// Process-wide counters of roost (`struct roost_stats` of roost.h), one\n");
    s.push_str("/// `u64` per entry of `include/roost_stats.def`, in its order.\n");
    s.push_str(
        "#[repr(C)]\n#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]\npub struct Stats {\n",
    );
    for (name, desc) in &fields {
        let _ = writeln!(s, "    #[doc = {}]\n    pub {}: u64,", desc, name);
    }
    s.push_str("}\n\nimpl Stats {\n");
    s.push_str("    /// The field names, in order.\n");
    let _ = write!(
        s,
        "    pub const FIELDS: [&'static str; {}] = [",
        fields.len()
    );
    for (name, _) in &fields {
        let _ = write!(s, "\"{}\", ", name);
    }
    s.push_str("];\n\n");
    s.push_str("    /// The counters as (name, value) pairs, in order.\n");
    let _ = writeln!(
        s,
        "    pub fn to_pairs(&self) -> [(&'static str, u64); {}] {{",
        fields.len()
    );
    s.push_str("        [");
    for (name, _) in &fields {
        let _ = write!(s, "(\"{}\", self.{}), ", name, name);
    }
    s.push_str("]\n    }\n}\n");
    s
}
