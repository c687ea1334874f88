//! The shared token, the HMAC-SHA256 challenge and the ephemeral X25519 key
//! shares of the handshake.
//!
//! The token never crosses the wire. It comes from `--token-file` (created
//! 0600 with 32 random bytes, hex, when missing), else from the
//! `WIRESCOPE_TOKEN` environment variable, else from the default file
//! (`$XDG_CONFIG_HOME/wirescope/token` or `~/.config/wirescope/token`).
//!
//! **Forward secrecy.** Each end's handshake nonce is the public half of a
//! fresh X25519 key ([`Ephemeral`], x25519-dalek): it is as unpredictable as
//! a random nonce, so the HMAC challenge over both of them still proves the
//! token and refuses a replayed handshake, and the proofs authenticate the
//! two public keys, so a man in the middle cannot swap in his own. The
//! session keys ([`super::channel::SessionKeys`]) come from the X25519 shared
//! secret *and* the token, both fed to HKDF (a pre-shared key plus an
//! ephemeral Diffie-Hellman, as TLS 1.3's `psk_dhe_ke` mode combines them).
//! The secret halves are consumed by the key agreement and
//! zeroized when dropped (x25519-dalek's `EphemeralSecret` cannot be kept or
//! copied), so a token stolen later, together with a recording of the whole
//! connection, does not give the session keys.
//!
//! Why not the Noise framework (`snow`, `NNpsk0`): its handshake messages
//! replace this protocol's four frames and its transport replaces the
//! sealed framing and the data-connection key of [`super::channel`], or
//! needs its "risky raw split". Two reviewed primitives (X25519, HKDF) slotted
//! into the existing, tested challenge change less and add no new framing.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use x25519_dalek::{EphemeralSecret, PublicKey, SharedSecret};

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
    #[error("the token in {0} is empty (lines starting with # are comments); put a random string in it (e.g. `openssl rand -hex 32`)")]
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
    /// A token from raw text: lines starting with `#` are comments (the
    /// packaged `/etc/wirescope/token` explains itself in them), surrounding
    /// whitespace is ignored.
    pub fn from_text(text: &str, origin: &str) -> Result<Self, TokenError> {
        let kept: String = text
            .split_inclusive('\n')
            .filter(|line| !line.trim_start().starts_with('#'))
            .collect();
        let t = kept.trim();
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
        let Ok(mut m) = HmacSha256::new_from_slice(&self.0) else {
            unreachable!("HMAC takes any key length")
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
    if let Err(e) = getrandom::fill(&mut b) {
        // No entropy source at all: nothing secure can be done; fail loudly.
        panic!("the OS random number generator failed: {e}");
    }
    b
}

/// Bytes of an X25519 key share (a handshake nonce).
pub const SHARE_LEN: usize = 32;

/// One end's ephemeral X25519 key for one handshake: the public share goes
/// out as the handshake nonce; the secret is used once by [`Ephemeral::agree`]
/// and zeroized when it is dropped.
pub struct Ephemeral {
    secret: EphemeralSecret,
    share: PublicKey,
}

impl std::fmt::Debug for Ephemeral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ephemeral({})", hex::encode(self.share.as_bytes()))
    }
}

/// The peer's key share was unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// Not hex of the right length.
    #[error("its key share is not {SHARE_LEN} hex bytes")]
    Malformed,
    /// A low-order point: the shared secret would not depend on our key.
    #[error("its key share is not a usable X25519 public key")]
    NotContributory,
}

impl Ephemeral {
    /// A fresh key from the OS random number generator.
    pub fn generate() -> Self {
        let secret = EphemeralSecret::random();
        let share = PublicKey::from(&secret);
        Ephemeral { secret, share }
    }

    /// The public share (sent as this end's nonce).
    pub fn share(&self) -> [u8; SHARE_LEN] {
        self.share.to_bytes()
    }

    /// The shared secret with the peer's share; consumes (and so zeroizes)
    /// the secret half. A share that makes the result independent of our
    /// secret (a low-order point) is refused.
    pub fn agree(self, peer: &[u8; SHARE_LEN]) -> Result<SharedSecret, ShareError> {
        let shared = self.secret.diffie_hellman(&PublicKey::from(*peer));
        shared
            .was_contributory()
            .then_some(shared)
            .ok_or(ShareError::NotContributory)
    }
}

/// A key share from its hex form on the wire.
pub fn parse_share(text: &str) -> Result<[u8; SHARE_LEN], ShareError> {
    let mut b = [0u8; SHARE_LEN];
    hex::decode_to_slice(text, &mut b).map_err(|_| ShareError::Malformed)?;
    Ok(b)
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
    fn both_ends_agree_and_low_order_shares_are_refused() {
        let a = Ephemeral::generate();
        let c = Ephemeral::generate();
        let (sa, sc) = (a.share(), c.share());
        assert_ne!(sa, sc, "every handshake draws a fresh key");
        let k1 = a.agree(&sc).unwrap();
        let k2 = c.agree(&sa).unwrap();
        assert_eq!(k1.as_bytes(), k2.as_bytes());
        // The all-zero point and the point of order 1 give a shared secret
        // that an observer knows too.
        let mut one = [0u8; SHARE_LEN];
        one[0] = 1;
        for bad in [[0u8; SHARE_LEN], one] {
            assert_eq!(
                Ephemeral::generate().agree(&bad).err(),
                Some(ShareError::NotContributory)
            );
        }
    }

    #[test]
    fn shares_parse_only_at_their_length() {
        let s = Ephemeral::generate().share();
        assert_eq!(parse_share(&hex::encode(s)).unwrap(), s);
        for bad in ["", "zz", &hex::encode([1u8; 16]), &hex::encode([1u8; 33])] {
            assert_eq!(
                parse_share(bad).unwrap_err(),
                ShareError::Malformed,
                "{bad}"
            );
        }
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

    /// The packaged placeholder holds only comments: the agent refuses it as
    /// empty; once a token is written below the comments, that is the token.
    #[test]
    fn comment_lines_in_a_token_file_are_not_the_token() {
        let placeholder = "# Put the token here.\n  # indented comment\n\n";
        let e = Token::from_text(placeholder, "/etc/wirescope/token").unwrap_err();
        assert!(matches!(e, TokenError::Empty(_)), "{e}");
        assert!(
            e.to_string().contains("lines starting with # are comments"),
            "{e}"
        );
        let t = Token::from_text(&format!("{placeholder}abc123\n# after\n"), "f").unwrap();
        assert_eq!(
            t.as_text(),
            Token::from_text("abc123", "f").unwrap().as_text()
        );
        // A file without comments reads as before.
        let plain = Token::from_text("  x y \n", "f").unwrap();
        assert_eq!(
            plain.as_text(),
            Token::from_text("x y", "f").unwrap().as_text()
        );
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
