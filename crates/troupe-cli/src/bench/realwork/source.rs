//! The crate the realwork suite builds: its committed skeleton (a `Cargo.toml` with no
//! dependencies, a `src/lib.rs` that declares every module, a `CHANGELOG.md`, a `.gitignore`)
//! and, for each task, the module and its unit tests the scripted agents write — real Rust that
//! compiles and whose tests pass.
//!
//! Task `i` builds one module, `src/<m>.rs`, whose unit tests are in `src/<m>/tests.rs`. The
//! first eight modules are eight different small libraries; past eight the kinds repeat under
//! numbered names (`gcd_8`, …). Tasks 0 and 1 also add a line to `CHANGELOG.md` at the same place:
//! on two branches, that is the one merge that conflicts.

/// The shared file two tasks change.
pub const CHANGELOG: &str = "CHANGELOG.md";

/// Where in the changelog both tasks add their line.
const UNRELEASED: &str = "## Unreleased\n";

/// One kind of module: what it does, its code and its tests.
struct Kind {
    name: &'static str,
    what: &'static str,
    source: &'static str,
    tests: &'static str,
}

const KINDS: [Kind; 8] = [
    Kind {
        name: "gcd",
        what: "greatest common divisor and least common multiple of u64",
        source: "/// The greatest common divisor (Euclid).\n\
               pub fn gcd(a: u64, b: u64) -> u64 {\n    if b == 0 {\n        a\n    } else {\n        gcd(b, a % b)\n    }\n}\n\n\
               /// The least common multiple; 0 when either is 0.\n\
               pub fn lcm(a: u64, b: u64) -> u64 {\n    if a == 0 || b == 0 {\n        0\n    } else {\n        a / gcd(a, b) * b\n    }\n}\n",
        tests: "use super::*;\n\n#[test]\nfn gcd_of_pairs() {\n    assert_eq!(gcd(12, 18), 6);\n    assert_eq!(gcd(0, 5), 5);\n    assert_eq!(gcd(17, 5), 1);\n}\n\n\
                #[test]\nfn lcm_of_pairs() {\n    assert_eq!(lcm(4, 6), 12);\n    assert_eq!(lcm(0, 6), 0);\n}\n",
    },
    Kind {
        name: "fib",
        what: "Fibonacci numbers, iteratively",
        source: "/// The n-th Fibonacci number (fib(0) = 0); `None` past u64.\n\
               pub fn fib(n: u32) -> Option<u64> {\n    if n == 0 {\n        return Some(0);\n    }\n    let (mut a, mut b) = (0u64, 1u64);\n    for _ in 1..n {\n        let next = a.checked_add(b)?;\n        a = b;\n        b = next;\n    }\n    Some(b)\n}\n",
        tests: "use super::*;\n\n#[test]\nfn first_numbers() {\n    assert_eq!(fib(0), Some(0));\n    assert_eq!(fib(1), Some(1));\n    assert_eq!(fib(10), Some(55));\n}\n\n\
                #[test]\nfn overflow_is_none() {\n    assert_eq!(fib(93), Some(12_200_160_415_121_876_738));\n    assert_eq!(fib(200), None);\n}\n",
    },
    Kind {
        name: "primes",
        what: "primality and the primes below a bound",
        source: "/// Whether n is prime (trial division).\n\
               pub fn is_prime(n: u64) -> bool {\n    if n < 2 {\n        return false;\n    }\n    let mut d = 2;\n    while d * d <= n {\n        if n % d == 0 {\n            return false;\n        }\n        d += 1;\n    }\n    true\n}\n\n\
               /// The primes below `bound`, in order.\n\
               pub fn primes_below(bound: u64) -> Vec<u64> {\n    (2..bound).filter(|n| is_prime(*n)).collect()\n}\n",
        tests: "use super::*;\n\n#[test]\nfn small_primes() {\n    assert_eq!(primes_below(20), vec![2, 3, 5, 7, 11, 13, 17, 19]);\n}\n\n\
                #[test]\nfn not_primes() {\n    assert!(!is_prime(0));\n    assert!(!is_prime(1));\n    assert!(!is_prime(91));\n    assert!(is_prime(97));\n}\n",
    },
    Kind {
        name: "words",
        what: "word counting and reversing the words of a text",
        source: "/// The words of `text` in reverse order, one space apart.\n\
               pub fn reverse_words(text: &str) -> String {\n    text.split_whitespace().rev().collect::<Vec<_>>().join(\" \")\n}\n\n\
               /// How many words `text` has.\n\
               pub fn word_count(text: &str) -> usize {\n    text.split_whitespace().count()\n}\n",
        tests: "use super::*;\n\n#[test]\nfn reverses() {\n    assert_eq!(reverse_words(\"one  two three\"), \"three two one\");\n    assert_eq!(reverse_words(\"\"), \"\");\n}\n\n\
                #[test]\nfn counts() {\n    assert_eq!(word_count(\" a b\\tc\\n\"), 3);\n}\n",
    },
    Kind {
        name: "roman",
        what: "roman numerals from integers",
        source: "const NUMERALS: [(u32, &str); 13] = [\n    (1000, \"M\"),\n    (900, \"CM\"),\n    (500, \"D\"),\n    (400, \"CD\"),\n    (100, \"C\"),\n    (90, \"XC\"),\n    (50, \"L\"),\n    (40, \"XL\"),\n    (10, \"X\"),\n    (9, \"IX\"),\n    (5, \"V\"),\n    (4, \"IV\"),\n    (1, \"I\"),\n];\n\n\
               /// `n` in roman numerals (empty for 0).\n\
               pub fn to_roman(mut n: u32) -> String {\n    let mut out = String::new();\n    for (value, numeral) in NUMERALS {\n        while n >= value {\n            out.push_str(numeral);\n            n -= value;\n        }\n    }\n    out\n}\n",
        tests: "use super::*;\n\n#[test]\nfn numerals() {\n    assert_eq!(to_roman(1994), \"MCMXCIV\");\n    assert_eq!(to_roman(4), \"IV\");\n    assert_eq!(to_roman(0), \"\");\n}\n",
    },
    Kind {
        name: "rle",
        what: "run-length encoding of text",
        source: "/// `aaab` as `3a1b`.\n\
               pub fn encode(text: &str) -> String {\n    let mut out = String::new();\n    let mut chars = text.chars().peekable();\n    while let Some(c) = chars.next() {\n        let mut run = 1;\n        while chars.peek() == Some(&c) {\n            chars.next();\n            run += 1;\n        }\n        out.push_str(&run.to_string());\n        out.push(c);\n    }\n    out\n}\n\n\
               /// The inverse of `encode`; `None` for a malformed input.\n\
               pub fn decode(code: &str) -> Option<String> {\n    let mut out = String::new();\n    let mut run = String::new();\n    for c in code.chars() {\n        if c.is_ascii_digit() {\n            run.push(c);\n        } else {\n            let n: usize = run.parse().ok()?;\n            out.extend(std::iter::repeat(c).take(n));\n            run.clear();\n        }\n    }\n    run.is_empty().then_some(out)\n}\n",
        tests: "use super::*;\n\n#[test]\nfn round_trip() {\n    assert_eq!(encode(\"aaabcc\"), \"3a1b2c\");\n    assert_eq!(decode(\"3a1b2c\").as_deref(), Some(\"aaabcc\"));\n}\n\n\
                #[test]\nfn malformed() {\n    assert_eq!(decode(\"3\"), None);\n    assert_eq!(decode(\"a\"), None);\n}\n",
    },
    Kind {
        name: "checksum",
        what: "the Adler-32 checksum of bytes",
        source: "/// Adler-32 of `data`.\n\
               pub fn adler32(data: &[u8]) -> u32 {\n    const MOD: u32 = 65_521;\n    let (mut a, mut b) = (1u32, 0u32);\n    for byte in data {\n        a = (a + u32::from(*byte)) % MOD;\n        b = (b + a) % MOD;\n    }\n    (b << 16) | a\n}\n",
        tests: "use super::*;\n\n#[test]\nfn known_values() {\n    assert_eq!(adler32(b\"Wikipedia\"), 0x11E6_0398);\n    assert_eq!(adler32(b\"\"), 1);\n}\n",
    },
    Kind {
        name: "stats",
        what: "mean and median of a sample",
        source: "/// The mean; `None` for an empty sample.\n\
               pub fn mean(sample: &[f64]) -> Option<f64> {\n    if sample.is_empty() {\n        return None;\n    }\n    Some(sample.iter().sum::<f64>() / sample.len() as f64)\n}\n\n\
               /// The median; `None` for an empty sample.\n\
               pub fn median(sample: &[f64]) -> Option<f64> {\n    let mut sorted = sample.to_vec();\n    sorted.sort_by(|a, b| a.total_cmp(b));\n    let n = sorted.len();\n    match n {\n        0 => None,\n        _ if n % 2 == 1 => Some(sorted[n / 2]),\n        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),\n    }\n}\n",
        tests: "use super::*;\n\n#[test]\nfn mean_and_median() {\n    assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));\n    assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));\n    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));\n}\n\n\
                #[test]\nfn empty() {\n    assert_eq!(mean(&[]), None);\n    assert_eq!(median(&[]), None);\n}\n",
    },
];

/// One task's module, as the agents write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The module's name, a Rust identifier: `src/<name>.rs`.
    pub name: String,
    /// What it does, for the task's text.
    pub what: &'static str,
    /// `src/<name>.rs`: the code, then `mod tests;` under `#[cfg(test)]`.
    pub source: String,
    /// `src/<name>/tests.rs`.
    pub tests: String,
    /// Whether the task also adds its line to [`CHANGELOG`].
    pub changelog: bool,
}

impl Module {
    pub fn path(&self) -> String {
        format!("src/{}.rs", self.name)
    }

    pub fn tests_path(&self) -> String {
        format!("src/{}/tests.rs", self.name)
    }

    /// The board task's subject: the scripted agents find the module again by it.
    pub fn subject(&self) -> String {
        format!("module {}", self.name)
    }

    /// The board task's description.
    pub fn description(&self) -> String {
        let mut text = format!(
            "Write {} ({}) and its unit tests in {}. Read src/lib.rs first.",
            self.path(),
            self.what,
            self.tests_path()
        );
        if self.changelog {
            text.push_str(&format!(
                " Also add `{}` under `{}` in {CHANGELOG}.",
                self.changelog_line().trim_end(),
                UNRELEASED.trim_end()
            ));
        }
        text
    }

    /// The line the task adds to the changelog.
    pub fn changelog_line(&self) -> String {
        format!("- Added `{}`.\n", self.name)
    }

    /// The `edit_file` arguments that add the changelog line.
    pub fn changelog_edit(&self) -> (String, String) {
        (
            UNRELEASED.to_owned(),
            format!("{UNRELEASED}{}", self.changelog_line()),
        )
    }
}

/// The modules of `tasks` tasks, in task order.
pub fn modules(tasks: usize) -> Vec<Module> {
    (0..tasks)
        .map(|i| {
            let kind = &KINDS[i % KINDS.len()];
            let name = if i < KINDS.len() {
                kind.name.to_owned()
            } else {
                format!("{}_{i}", kind.name)
            };
            Module {
                name,
                what: kind.what,
                source: format!("{}\n#[cfg(test)]\nmod tests;\n", kind.source),
                tests: kind.tests.to_owned(),
                changelog: i < 2,
            }
        })
        .collect()
}

/// The subject's module among `modules`.
pub fn by_subject<'a>(modules: &'a [Module], subject: &str) -> Option<&'a Module> {
    let name = subject.strip_prefix("module ")?.split_whitespace().next()?;
    modules.iter().find(|m| m.name == name)
}

/// The committed skeleton: (path, content) of each file.
pub fn skeleton(modules: &[Module]) -> Vec<(&'static str, String)> {
    let mut lib = String::from("//! A small library, built module by module.\n\n");
    for module in modules {
        lib.push_str(&format!("pub mod {};\n", module.name));
    }
    vec![
        (
            "Cargo.toml",
            // `[workspace]`: the crate stands alone wherever its folder is.
            "[package]\nname = \"realwork\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n\n[workspace]\n"
                .to_owned(),
        ),
        ("src/lib.rs", lib),
        (CHANGELOG, format!("# Changelog\n\n{UNRELEASED}")),
        (".gitignore", "/target/\n/.troupe/\nCargo.lock\n".to_owned()),
    ]
}

/// The changelog once every module's line is in, in task order.
pub fn changelog_after(modules: &[Module]) -> Vec<String> {
    modules
        .iter()
        .filter(|m| m.changelog)
        .map(|m| m.changelog_line().trim_end().to_owned())
        .collect()
}

/// A conflicted file resolved to the union of both sides: every line outside the conflict
/// blocks, and inside each block our lines, then theirs. `None` when the text holds no
/// complete conflict block.
pub fn union_of_conflict(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut state = 0; // 0: outside, 1: ours, 2: theirs
    let mut blocks = 0;
    for line in text.split_inclusive('\n') {
        match state {
            0 if line.starts_with("<<<<<<<") => state = 1,
            1 if line.starts_with("=======") => state = 2,
            // diff3 style: the base's lines are left out.
            1 if line.starts_with("|||||||") => state = 3,
            3 if line.starts_with("=======") => state = 2,
            2 if line.starts_with(">>>>>>>") => {
                state = 0;
                blocks += 1;
            }
            3 => {}
            _ => out.push_str(line),
        }
    }
    (state == 0 && blocks > 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_have_distinct_names_and_two_touch_the_changelog() {
        let modules = modules(10);
        let mut names: Vec<&str> = modules.iter().map(|m| m.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 10);
        assert_eq!(modules[8].name, "gcd_8");
        assert_eq!(modules.iter().filter(|m| m.changelog).count(), 2);
        assert_eq!(
            by_subject(&modules, &modules[9].subject()),
            Some(&modules[9])
        );
        assert!(modules[0].source.ends_with("#[cfg(test)]\nmod tests;\n"));
    }

    #[test]
    fn the_union_keeps_both_sides() {
        let conflicted = "# Changelog\n\n## Unreleased\n<<<<<<< HEAD\n- Added `gcd`.\n=======\n\
                          - Added `fib`.\n>>>>>>> troupe/mate-1\n";
        assert_eq!(
            union_of_conflict(conflicted).as_deref(),
            Some("# Changelog\n\n## Unreleased\n- Added `gcd`.\n- Added `fib`.\n")
        );
        assert_eq!(union_of_conflict("no conflict\n"), None);
        assert_eq!(union_of_conflict("<<<<<<< HEAD\nours\n"), None);
    }
}
