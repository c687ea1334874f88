//! The shared token and the HMAC-SHA256 challenge.
//!
//! The token never crosses the wire. It comes from `--token-file` (created
//! 0600 with 32 random bytes, hex, when missing), else from the
//! `WIRESCOPE_TOKEN` environment variable, else from the default file
//! (`$XDG_CONFIG_HOME/wirescope/token` or `~/.config/wirescope/token`).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

type HmacSha256 = Hmac<Sha256>;

/// Environment variable that carries the token.
pub const TOKEN_ENV: &str = "WIRESCOPE_TOKEN";

/// Shorter tokens get a warning: 32 hex characters hold 128 bits.
pub const MIN_TOKEN_CHARS: usize = 32;

/// A shared secret.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Where a token came from (printed so users know which file to copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOrigin {
    /// From the environment.
    Env,
    /// Read from this existing file.
    File(PathBuf),
    /// Created now in this file.
    Created(PathBuf),
}

/// Token errors.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Reading or creating the file failed.
    #[error("token file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file or variable is empty.
    #[error("the token in {0} is empty; put a random string in it (e.g. `openssl rand -hex 32`)")]
    Empty(String),
    /// The file is readable or writable by others.
    #[error("token file {path} has mode {mode:o}: others can read it; run `chmod 600 {path}`")]
    Insecure {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The `--token-file` given does not exist.
    #[error("--token-file {0}: no such file; copy the agent's token file there (the agent prints its path when it starts)")]
    GivenMissing(PathBuf),
    /// No token anywhere and we may not create one.
    #[error("no token: copy the agent's token file to {0} (the agent prints its path), pass --token-file, or set WIRESCOPE_TOKEN")]
    Missing(PathBuf),
}

impl Token {
    /// A token from raw text (surrounding whitespace ignored).
    pub fn from_text(text: &str, origin: &str) -> Result<Self, TokenError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(TokenError::Empty(origin.to_string()));
        }
        Ok(Token(t.as_bytes().to_vec()))
    }

    /// A warning when the token is too short to resist guessing: fewer than
    /// 32 characters (128 bits written as hex, the least wirescope asks for;
    /// the tokens it generates carry 256). `None` when long enough.
    pub fn weakness(&self) -> Option<String> {
        (self.0.len() < MIN_TOKEN_CHARS).then(|| {
            format!(
                "the token has only {} characters; use at least {MIN_TOKEN_CHARS} random ones (e.g. `openssl rand -hex 32`), or delete the file and let `wirescope agent` create one",
                self.0.len()
            )
        })
    }

    /// A fresh random token (64 hex characters).
    pub fn random() -> Self {
        Token(hex::encode(random_bytes::<32>()).into_bytes())
    }

    /// The secret itself, as key material for the session keys.
    pub(crate) fn secret(&self) -> &[u8] {
        &self.0
    }

    /// The token text (to hand to a child agent through the environment).
    pub fn as_text(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    /// `HMAC(token, label ‖ a ‖ b)`.
    pub fn mac(&self, label: &str, a: &[u8], b: &[u8]) -> [u8; 32] {
        self.hmac(label, a, b).finalize().into_bytes().into()
    }

    /// Constant-time check of a hex proof.
    pub fn verify(&self, label: &str, a: &[u8], b: &[u8], proof_hex: &str) -> bool {
        let Ok(proof) = hex::decode(proof_hex) else {
            return false;
        };
        self.hmac(label, a, b).verify_slice(&proof).is_ok()
    }

    fn hmac(&self, label: &str, a: &[u8], b: &[u8]) -> HmacSha256 {
        // HMAC accepts keys of any length, so new_from_slice cannot fail.
        let mut m = match HmacSha256::new_from_slice(&self.0) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC takes any key length"),
        };
        m.update(b"wirescope-auth-v1/");
        m.update(label.as_bytes());
        m.update(&(a.len() as u32).to_be_bytes());
        m.update(a);
        m.update(b);
        m
    }
}

/// `N` random bytes from the OS.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    if let Err(e) = getrandom::getrandom(&mut b) {
        // No entropy source at all: nothing secure can be done; fail loudly.
        panic!("the OS random number generator failed: {e}");
    }
    b
}

/// The default token file.
pub fn default_token_path() -> PathBuf {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from("/etc"));
    base.join("wirescope").join("token")
}

/// Resolve the token: explicit file, else environment, else default file.
/// `create` makes a missing file (the agent does; the controller does not).
pub fn load_token(file: Option<&Path>, create: bool) -> Result<(Token, TokenOrigin), TokenError> {
    if file.is_none() {
        if let Ok(t) = std::env::var(TOKEN_ENV) {
            return Ok((Token::from_text(&t, TOKEN_ENV)?, TokenOrigin::Env));
        }
    }
    let path = file
        .map(Path::to_path_buf)
        .unwrap_or_else(default_token_path);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            // Like ssh with its keys: a token others can read authenticates them too.
            use crate::probe::trusted::{check_metadata, Untrusted, SECRET};
            if let Ok(m) = std::fs::metadata(&path) {
                if let Err(Untrusted::Mode { mode, .. }) = check_metadata(&m, SECRET) {
                    return Err(TokenError::Insecure {
                        path,
                        mode: mode & 0o777,
                    });
                }
            }
            Ok((
                Token::from_text(&text, &path.display().to_string())?,
                TokenOrigin::File(path),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            let token = Token::random();
            write_new_token(&path, &token).map_err(|source| TokenError::Io {
                path: path.clone(),
                source,
            })?;
            Ok((token, TokenOrigin::Created(path)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && file.is_some() => {
            Err(TokenError::GivenMissing(path))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(TokenError::Missing(path)),
        Err(source) => Err(TokenError::Io { path, source }),
    }
}

fn write_new_token(path: &Path, token: &Token) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    writeln!(f, "{}", token.as_text())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_missing_token_file_given_by_the_user_is_named() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("nonexistent");
        let e = load_token(Some(&p), false).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--token-file {}: no such file", p.display())),
            "{e}"
        );
        assert!(!e.contains("pass --token-file"), "{e}");
    }

    #[test]
    fn short_tokens_are_flagged_generated_ones_are_not() {
        assert!(Token::random().weakness().is_none());
        let w = Token::from_text("x", "test").unwrap().weakness().unwrap();
        assert!(
            w.contains("only 1 characters") && w.contains("openssl rand"),
            "{w}"
        );
        let edge = "a".repeat(MIN_TOKEN_CHARS);
        assert!(Token::from_text(&edge, "test")
            .unwrap()
            .weakness()
            .is_none());
    }

    #[test]
    fn proofs_verify_only_with_the_same_token_and_label() {
        let t = Token::from_text("secret", "test").unwrap();
        let p = hex::encode(t.mac("controller", b"a", b"b"));
        assert!(t.verify("controller", b"a", b"b", &p));
        assert!(!t.verify("agent", b"a", b"b", &p));
        assert!(!Token::from_text("other", "t")
            .unwrap()
            .verify("controller", b"a", b"b", &p));
        assert!(!t.verify("controller", b"a", b"b", "zz"));
    }

    #[test]
    fn creates_a_private_token_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/token");
        let (t1, o1) = load_token(Some(&path), true).unwrap();
        assert_eq!(o1, TokenOrigin::Created(path.clone()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (t2, o2) = load_token(Some(&path), true).unwrap();
        assert_eq!(o2, TokenOrigin::File(path.clone()));
        assert_eq!(t1.as_text(), t2.as_text());
    }

    #[test]
    fn a_token_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, "secret\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = load_token(Some(&p), false).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(load_token(Some(&p), false).is_ok());
    }

    #[test]
    fn missing_and_empty_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("none");
        assert!(matches!(
            load_token(Some(&p), false),
            Err(TokenError::GivenMissing(_))
        ));
        std::fs::write(&p, "\n").unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        assert!(matches!(
            load_token(Some(&p), false),
            Err(TokenError::Empty(_))
        ));
    }
}
