//! The secret that every request of `troupe serve` must carry: 32 random bytes from the kernel,
//! written as 64 hex digits, compared in constant time.

use std::io::Read;

/// The server's access token.
pub struct Token(String);

impl Token {
    /// 32 bytes of `/dev/urandom`.
    pub fn generate() -> std::io::Result<Self> {
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(Self(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `given` is the token. The time taken depends on the lengths only, not on where
    /// the first difference is.
    pub fn matches(&self, given: &str) -> bool {
        constant_time_eq(self.0.as_bytes(), given.as_bytes())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keep the comparison from being turned into an early-exit loop.
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_64_hex_digits_and_matches_only_itself() {
        let token = Token::generate().unwrap();
        assert_eq!(token.as_str().len(), 64);
        assert!(token.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(token.matches(token.as_str()));
        assert!(!token.matches(""));
        assert!(!token.matches(&token.as_str()[..63]));
        let mut other = token.as_str().to_owned();
        other.replace_range(63.., if other.ends_with('0') { "1" } else { "0" });
        assert!(!token.matches(&other));
        assert_ne!(Token::generate().unwrap().as_str(), token.as_str());
    }
}
