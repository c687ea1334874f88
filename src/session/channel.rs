//! The control channel after the handshake: every frame authenticated and
//! encrypted, in order, in both directions.
//!
//! The HMAC challenge ([`super::auth`]) proves once that both ends know the
//! token. On its own it would leave the frames that follow open to a
//! man-in-the-middle who relays the handshake and then speaks for the
//! controller. So both ends derive session keys from what only they have —
//! the X25519 shared secret of their two ephemeral keys and the token — with
//! HKDF-SHA256 (both key shares, which are the handshake nonces, are the
//! salt), and seal every later frame with ChaCha20-Poly1305 (RustCrypto's
//! AEAD, a reviewed construction; nothing here is a new scheme):
//!
//! * one key per direction (controller → agent, agent → controller), so a
//!   frame cannot be reflected back to its sender;
//! * the nonce is the frame's sequence number in its direction (96 bits: four
//!   zero bytes, then the 64-bit counter); the receiver expects exactly the
//!   next number, so a replayed, dropped, reordered or forged frame fails to
//!   open and ends the session;
//! * the 4-byte length prefix is the associated data, so it is authenticated
//!   too.
//!
//! A third key authenticates data connections: a data connection opens with
//! the test's id, its index and an HMAC of both under that key (never the key
//! or a reusable cookie in clear), so only the authenticated controller of
//! the running test can fill its slots.
//!
//! What it protects: authenticity and integrity of every control frame and
//! the confidentiality of their contents (test parameters, Samples), and the
//! binding of data connections to the session. What it does not: the data
//! connections' payload (benchmark traffic) is neither encrypted nor
//! authenticated beyond their first bytes; traffic analysis (sizes, timing)
//! is visible; a stolen token lets its holder pose as either end from then
//! on. It does not open sessions recorded before: the ephemeral secrets are
//! gone (forward secrecy), and the keys here are zeroized when dropped.

use super::auth::Token;
use super::proto::{check_len, Msg, ProtoError, MAX_FRAME};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Bytes the AEAD adds to every frame (the Poly1305 tag).
pub const TAG_LEN: usize = 16;
/// Bytes of the data-connection tag.
pub const DATA_TAG_LEN: usize = 16;

/// Which way a frame travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Controller → agent.
    ToAgent,
    /// Agent → controller.
    ToController,
}

/// Everything a session derives from the handshake (zeroized when dropped).
#[derive(zeroize::ZeroizeOnDrop)]
pub struct SessionKeys {
    to_agent: [u8; 32],
    to_controller: [u8; 32],
    data: [u8; 32],
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys(<redacted>)")
    }
}

impl SessionKeys {
    /// Keys of the session whose handshake exchanged these key shares (the
    /// agent's, then the controller's) and agreed on `shared` (the X25519
    /// shared secret), under `token`. Without `shared` — which only the two
    /// ends' ephemeral secrets give — the token and the shares on the wire
    /// give nothing.
    pub fn derive(token: &Token, share_a: &[u8], share_c: &[u8], shared: &[u8; 32]) -> Self {
        let mut salt = Vec::with_capacity(share_a.len() + share_c.len() + 8);
        salt.extend_from_slice(&(share_a.len() as u32).to_be_bytes());
        salt.extend_from_slice(share_a);
        salt.extend_from_slice(&(share_c.len() as u32).to_be_bytes());
        salt.extend_from_slice(share_c);
        let mut ikm = zeroize::Zeroizing::new(Vec::with_capacity(32 + token.secret().len()));
        ikm.extend_from_slice(shared);
        ikm.extend_from_slice(token.secret());
        let hk = Hkdf::<Sha256>::new(Some(&salt), &ikm);
        let key = |label: &[u8]| {
            let mut k = [0u8; 32];
            // 32 bytes is far below HKDF-SHA256's 8160-byte limit.
            if hk.expand(label, &mut k).is_err() {
                unreachable!("HKDF output of 32 bytes is always valid");
            }
            k
        };
        SessionKeys {
            to_agent: key(b"wirescope v4 controller to agent"),
            to_controller: key(b"wirescope v4 agent to controller"),
            data: key(b"wirescope v4 data connections"),
        }
    }

    /// The sealer for frames this end sends in `dir`.
    pub fn sealer(&self, dir: Direction) -> Sealer {
        Sealer(Cipher::new(self.key(dir)))
    }

    /// The opener for frames this end receives from `dir`.
    pub fn opener(&self, dir: Direction) -> Opener {
        Opener(Cipher::new(self.key(dir)))
    }

    fn key(&self, dir: Direction) -> &[u8; 32] {
        match dir {
            Direction::ToAgent => &self.to_agent,
            Direction::ToController => &self.to_controller,
        }
    }

    /// The tag a data connection of test `test` with index `index` presents.
    pub fn data_tag(&self, test: u64, index: u32) -> [u8; DATA_TAG_LEN] {
        let mut t = [0u8; DATA_TAG_LEN];
        t.copy_from_slice(&self.data_mac(test, index).finalize().into_bytes()[..DATA_TAG_LEN]);
        t
    }

    /// Constant-time check of a data connection's tag.
    pub fn verify_data_tag(&self, test: u64, index: u32, tag: &[u8]) -> bool {
        self.data_mac(test, index)
            .verify_truncated_left(tag)
            .is_ok()
    }

    fn data_mac(&self, test: u64, index: u32) -> Hmac<Sha256> {
        // HMAC takes any key length.
        let Ok(mut m) = <Hmac<Sha256> as Mac>::new_from_slice(&self.data) else {
            unreachable!("HMAC takes any key length")
        };
        m.update(b"wirescope v4 data/");
        m.update(&test.to_be_bytes());
        m.update(&index.to_be_bytes());
        m
    }
}

struct Cipher {
    aead: ChaCha20Poly1305,
    seq: u64,
}

impl Cipher {
    fn new(key: &[u8; 32]) -> Self {
        Cipher {
            aead: ChaCha20Poly1305::new(Key::from_slice(key)),
            seq: 0,
        }
    }

    /// The nonce of the next frame; a session never comes near 2^64 frames,
    /// and it ends rather than reuse a nonce.
    fn next_nonce(&mut self) -> Result<[u8; 12], ProtoError> {
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&self.seq.to_be_bytes());
        self.seq = self
            .seq
            .checked_add(1)
            .ok_or_else(|| ProtoError::Sealed("frame counter exhausted".into()))?;
        Ok(n)
    }
}

/// Seals the frames one end sends in one direction.
pub struct Sealer(Cipher);

/// Opens the frames one end receives from one direction, in order.
pub struct Opener(Cipher);

impl Sealer {
    /// One frame: the length prefix, then `msg` encrypted and authenticated.
    pub fn seal(&mut self, msg: &Msg) -> Result<Vec<u8>, ProtoError> {
        let body = serde_json::to_vec(msg)?;
        let prefix = super::proto::frame_len(body.len() + TAG_LEN)?.to_be_bytes();
        let nonce = self.0.next_nonce()?;
        let ct = self
            .0
            .aead
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &body,
                    aad: &prefix,
                },
            )
            .map_err(|_| ProtoError::Sealed("encryption failed".into()))?;
        let mut frame = Vec::with_capacity(4 + ct.len());
        frame.extend_from_slice(&prefix);
        frame.extend_from_slice(&ct);
        Ok(frame)
    }
}

impl Opener {
    /// Open the frame whose length prefix was `prefix` and whose sealed body is `ct`.
    pub fn open(&mut self, prefix: [u8; 4], ct: &[u8]) -> Result<Msg, ProtoError> {
        let nonce = self.0.next_nonce()?;
        let body = self
            .0
            .aead
            .decrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: ct,
                    aad: &prefix,
                },
            )
            .map_err(|_| {
                ProtoError::Sealed(
                    "a control frame failed authentication (forged, replayed or reordered); the session ends".into(),
                )
            })?;
        Ok(serde_json::from_slice(&body)?)
    }
}

/// The sending half of a sealed channel.
pub struct SealedWriter<W> {
    w: W,
    sealer: Sealer,
}

impl<W: AsyncWrite + Unpin> SealedWriter<W> {
    /// Seal frames written to `w` with `sealer`.
    pub fn new(w: W, sealer: Sealer) -> Self {
        SealedWriter { w, sealer }
    }

    /// Send one frame.
    pub async fn send(&mut self, msg: &Msg) -> Result<(), ProtoError> {
        write_sealed(&mut self.w, &mut self.sealer, msg).await
    }

    /// Close the write side.
    pub async fn shutdown(&mut self) {
        let _ = self.w.shutdown().await;
    }

    /// The underlying writer (the sealer is dropped).
    pub fn into_inner(self) -> W {
        self.w
    }
}

/// Write one sealed frame and flush it.
pub async fn write_sealed<W: AsyncWrite + Unpin>(
    w: &mut W,
    sealer: &mut Sealer,
    msg: &Msg,
) -> Result<(), ProtoError> {
    let frame = sealer.seal(msg)?;
    w.write_all(&frame).await?;
    w.flush().await?;
    Ok(())
}

/// Read and open one sealed frame (at most [`MAX_FRAME`] bytes).
pub async fn read_sealed<R: AsyncRead + Unpin>(
    r: &mut R,
    opener: &mut Opener,
) -> Result<Msg, ProtoError> {
    let mut prefix = [0u8; 4];
    r.read_exact(&mut prefix)
        .await
        .map_err(super::proto::eof_is_closed)?;
    let len = check_len(prefix, MAX_FRAME)? as usize;
    if len < TAG_LEN {
        return Err(ProtoError::Sealed(format!(
            "a sealed frame of {len} bytes is shorter than its tag"
        )));
    }
    let mut ct = vec![0u8; len];
    r.read_exact(&mut ct)
        .await
        .map_err(super::proto::eof_is_closed)?;
    opener.open(prefix, &ct)
}

/// Read sealed frames on a task of their own and pass each, in order, to
/// `tx`; the task ends after the first error (which it passes on) or when
/// the receiver is gone. The caller aborts the handle when it is done.
pub fn spawn_sealed_reader<R: AsyncRead + Unpin + Send + 'static>(
    mut rd: R,
    mut opener: Opener,
    tx: tokio::sync::mpsc::Sender<Result<Msg, ProtoError>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let m = read_sealed(&mut rd, &mut opener).await;
            let end = m.is_err();
            if tx.send(m).await.is_err() || end {
                return;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARED: [u8; 32] = [9; 32];

    fn keys() -> (SessionKeys, SessionKeys) {
        let t = Token::from_text("channel-test-token-0123456789abcdef", "t").unwrap();
        (
            SessionKeys::derive(&t, b"agent-nonce", b"ctl-nonce", &SHARED),
            SessionKeys::derive(&t, b"agent-nonce", b"ctl-nonce", &SHARED),
        )
    }

    fn tick() -> Msg {
        Msg::Tick {}
    }

    #[test]
    fn frames_open_in_order_on_the_other_end() {
        let (c, a) = keys();
        let mut s = c.sealer(Direction::ToAgent);
        let mut o = a.opener(Direction::ToAgent);
        for m in [tick(), Msg::Stop {}, Msg::Bye {}] {
            let f = s.seal(&m).unwrap();
            let prefix = [f[0], f[1], f[2], f[3]];
            assert_eq!(o.open(prefix, &f[4..]).unwrap(), m);
        }
    }

    #[test]
    fn forged_replayed_reordered_and_reflected_frames_fail() {
        let (c, a) = keys();
        let mut s = c.sealer(Direction::ToAgent);
        let f1 = s.seal(&tick()).unwrap();
        let f2 = s.seal(&Msg::Stop {}).unwrap();
        let pre = |f: &[u8]| [f[0], f[1], f[2], f[3]];
        // Reordered: the second frame first.
        let mut o = a.opener(Direction::ToAgent);
        assert!(o.open(pre(&f2), &f2[4..]).is_err());
        // Replayed: the first frame twice.
        let mut o = a.opener(Direction::ToAgent);
        o.open(pre(&f1), &f1[4..]).unwrap();
        assert!(o.open(pre(&f1), &f1[4..]).is_err());
        // Forged: one bit flipped, or a different length prefix.
        let mut o = a.opener(Direction::ToAgent);
        let mut bad = f1.clone();
        bad[10] ^= 1;
        assert!(o.open(pre(&bad), &bad[4..]).is_err());
        let mut o = a.opener(Direction::ToAgent);
        let mut p = pre(&f1);
        p[3] ^= 1;
        assert!(o.open(p, &f1[4..]).is_err());
        // Reflected: a controller's frame back to the controller.
        let mut o = c.opener(Direction::ToController);
        assert!(o.open(pre(&f1), &f1[4..]).is_err());
        // Another session's keys (other nonces) open nothing.
        let t = Token::from_text("channel-test-token-0123456789abcdef", "t").unwrap();
        let other = SessionKeys::derive(&t, b"agent-nonce", b"other", &SHARED);
        let mut o = other.opener(Direction::ToAgent);
        assert!(o.open(pre(&f1), &f1[4..]).is_err());
        // Nor do keys of the same shares and token with another shared
        // secret: the token and the public shares alone give nothing.
        let other = SessionKeys::derive(&t, b"agent-nonce", b"ctl-nonce", &[0; 32]);
        let mut o = other.opener(Direction::ToAgent);
        assert!(o.open(pre(&f1), &f1[4..]).is_err());
    }

    #[test]
    fn data_tags_bind_test_and_index() {
        let (c, a) = keys();
        let t = c.data_tag(7, 3);
        assert!(a.verify_data_tag(7, 3, &t));
        assert!(!a.verify_data_tag(7, 4, &t));
        assert!(!a.verify_data_tag(8, 3, &t));
        assert!(!a.verify_data_tag(7, 3, &[0u8; DATA_TAG_LEN]));
    }

    #[tokio::test]
    async fn sealed_frames_cross_a_stream() {
        let (c, a) = keys();
        let (mut x, mut y) = tokio::io::duplex(1 << 16);
        let mut s = c.sealer(Direction::ToAgent);
        let mut o = a.opener(Direction::ToAgent);
        write_sealed(&mut x, &mut s, &Msg::Go {}).await.unwrap();
        assert_eq!(read_sealed(&mut y, &mut o).await.unwrap(), Msg::Go {});
    }
}
