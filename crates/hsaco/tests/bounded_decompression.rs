//! Bounded decompression: a CCOB whose declared uncompressed size lies about a small zlib or
//! zstd "bomb" payload fails with a typed [`hsaco::Error::Ccob`] and never allocates the declared
//! size. Peak heap use is measured with a counting global allocator in this test binary.
//!
//! The bombs are built by hand from the format specifications, so the test does not depend on an
//! encoder's choices: deflate fixed-Huffman blocks (RFC 1951 section 3.2.6) repeating a 258-byte
//! match at distance 1, and zstd RLE blocks (RFC 8878 section 3.1.1.2) of 128 KiB each.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use hsaco::bundle::{self, Method};
use hsaco::Error;

/// Counts live and peak heap bytes of the whole test binary.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Serialises the tests so the peak belongs to one of them.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::SeqCst) + l.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::SeqCst);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new > l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::SeqCst) + new - l.size();
                PEAK.fetch_max(now, Ordering::SeqCst);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::SeqCst);
            }
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result and the peak heap growth during it (bytes).
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let r = f();
    (r, PEAK.load(Ordering::SeqCst) - base)
}

/// LSB-first bit writer for deflate.
struct Bits {
    out: Vec<u8>,
    acc: u32,
    n: u32,
}

impl Bits {
    fn put(&mut self, value: u32, count: u32) {
        for i in 0..count {
            self.acc |= ((value >> i) & 1) << self.n;
            self.n += 1;
            if self.n == 8 {
                self.out.push(self.acc as u8);
                self.acc = 0;
                self.n = 0;
            }
        }
    }
    /// Huffman codes are sent most significant bit first (RFC 1951 section 3.1.1).
    fn code(&mut self, code: u32, len: u32) {
        for i in (0..len).rev() {
            self.put((code >> i) & 1, 1);
        }
    }
}

/// zlib stream (RFC 1950) whose deflate data is one fixed-Huffman block: the 24-byte bundle
/// magic as literals, literal 0, then `matches` copies of length 258 at distance 1. Decompresses
/// to the magic and `1 + 258 * matches` zero bytes (a decoder that checks the magic first still
/// has to decompress it all).
fn zlib_bomb(matches: u64) -> Vec<u8> {
    let mut b = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        n: 0,
    };
    b.put(1, 1); // BFINAL
    b.put(1, 2); // BTYPE 01: fixed Huffman
    for &c in bundle::BUNDLE_MAGIC {
        b.code(0x30 + u32::from(c), 8); // literals 0..=143: 8-bit codes 0x30 + value
    }
    b.code(0x30, 8); // literal 0
    for _ in 0..matches {
        b.code(0b1100_0101, 8); // length code 285 = 258
        b.code(0, 5); // distance code 0 = 1
    }
    b.code(0, 7); // end of block (256)
    if b.n > 0 {
        b.out.push(b.acc as u8);
    }
    // Adler-32 (RFC 1950 section 8.2) of the magic followed by 1 + 258 * matches zero bytes.
    let (mut a, mut bsum) = (1u64, 0u64);
    for &c in bundle::BUNDLE_MAGIC {
        a = (a + u64::from(c)) % 65521;
        bsum = (bsum + a) % 65521;
    }
    bsum = (bsum + a * ((1 + 258 * matches) % 65521)) % 65521;
    let adler = ((bsum << 16) | a) as u32;
    b.out.extend_from_slice(&adler.to_be_bytes());
    b.out
}

/// zstd frame (RFC 8878) without content size: a raw block with the bundle magic, then `blocks`
/// RLE blocks of 128 KiB zero bytes.
fn zstd_bomb(blocks: u64) -> Vec<u8> {
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd];
    out.push(0x00); // frame header descriptor: no FCS, no single segment, no checksum
    out.push(0x50); // window descriptor: exponent 10 => 2^20 bytes
                    // A raw block with the 24-byte bundle magic first.
    let raw = (bundle::BUNDLE_MAGIC.len() as u32) << 3; // Block_Size, Raw, not last
    out.extend_from_slice(&raw.to_le_bytes()[..3]);
    out.extend_from_slice(bundle::BUNDLE_MAGIC);
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = (128 * 1024) << 3 | 1 << 1 | last; // Block_Size, RLE, Last_Block
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(0);
    }
    out
}

/// CCOB v2 (20-byte header + 4-byte total): declared uncompressed size `declared`.
fn ccob_v2(method: Method, declared: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = b"CCOB".to_vec();
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&u16::from(method == Method::Zstd).to_le_bytes());
    out.extend_from_slice(&(24 + payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&declared.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// CCOB v3: declared uncompressed size `declared` (u64).
fn ccob_v3(method: Method, declared: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = b"CCOB".to_vec();
    out.extend_from_slice(&3u16.to_le_bytes());
    out.extend_from_slice(&u16::from(method == Method::Zstd).to_le_bytes());
    out.extend_from_slice(&(32 + payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&declared.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Decompresses with the default 4 GiB limit; returns the error text and the peak heap growth.
fn fails(ccob: &[u8]) -> (String, usize) {
    let (r, peak) =
        peak_during(|| bundle::decompress_ccob(ccob, 0x1000, bundle::DEFAULT_DECOMPRESS_LIMIT));
    let e = r.expect_err("a lying size must fail");
    assert!(matches!(e, Error::Ccob { offset: 0x1000, .. }), "{e:?}");
    (e.to_string(), peak)
}

/// Peak heap allowed while rejecting a bomb (bytes): decoder state only, far below the
/// declared sizes used here (>= 100 MiB).
const SMALL: usize = 8 << 20;

#[test]
fn the_bombs_really_expand() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // Sanity check of the hand-made streams with the real decoders: 1 + 258 * 4000 and
    // 8 * 128 KiB zero bytes.
    // The stored hash (v2: bytes 16..24) must be that of the expansion: the bundle magic, then
    // zero bytes.
    let hashed = |mut ccob: Vec<u8>, len: usize| {
        let mut plain = bundle::BUNDLE_MAGIC.to_vec();
        plain.resize(len, 0);
        ccob[16..24].copy_from_slice(&bundle::ccob_hash(&plain).to_le_bytes());
        ccob
    };
    let z = hashed(
        ccob_v2(Method::Zlib, 24 + 1 + 258 * 4000, &zlib_bomb(4000)),
        24 + 1 + 258 * 4000,
    );
    let (_, plain, _) = bundle::decompress_ccob(&z, 0, 1 << 30).expect("zlib bomb is valid");
    assert_eq!(plain.len(), 24 + 1 + 258 * 4000);
    assert!(plain.starts_with(bundle::BUNDLE_MAGIC) && plain[24..].iter().all(|&b| b == 0));
    let s = hashed(
        ccob_v2(Method::Zstd, 24 + (8 << 17), &zstd_bomb(8)),
        24 + (8 << 17),
    );
    let (_, plain, _) = bundle::decompress_ccob(&s, 0, 1 << 30).expect("zstd bomb is valid");
    assert_eq!(plain.len(), 24 + (8 << 17));
}

#[test]
fn declared_size_beyond_what_the_payload_can_expand_to() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // ~4 GiB declared (inside the default 4 GiB limit), payloads of a few KiB.
    let z = zlib_bomb(10_000);
    let (e, peak) = fails(&ccob_v2(Method::Zlib, 0xffff_0000, &z));
    assert_eq!(
        e,
        format!(
            "compressed offload bundle at offset 0x1000: declared uncompressed size 4294901760 bytes is more than a {}-byte Zlib payload can expand to ({} bytes)",
            z.len(),
            z.len() * 1032
        )
    );
    assert!(peak < SMALL, "peak {peak}");
    let s = zstd_bomb(100);
    let (e, peak) = fails(&ccob_v3(Method::Zstd, 0xffff_0000, &s));
    assert!(
        e.contains("is more than a 433-byte Zstd payload can expand to (14188544 bytes)"),
        "{e}"
    );
    assert!(peak < SMALL, "peak {peak}");
    // Beyond the limit altogether.
    let (e, _) = fails(&ccob_v3(Method::Zstd, 1 << 40, &s));
    assert!(e.ends_with("exceeds the limit of 4294967296 bytes"), "{e}");
}

#[test]
fn bomb_larger_than_declared_is_refused_without_allocating_it() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // zstd: 1024 RLE blocks = 128 MiB of output from 4 KiB; 100 MiB declared.
    let declared = 100 << 20;
    let (e, peak) = fails(&ccob_v3(Method::Zstd, declared, &zstd_bomb(1024)));
    assert_eq!(e, format!("compressed offload bundle at offset 0x1000: declared uncompressed size {declared} but the payload decompresses to more than {declared} bytes"));
    assert!(peak < SMALL, "peak {peak} bytes while rejecting");
    // zlib: 1 + 258 * 500_000 = ~123 MiB from ~800 KiB.
    let (e, peak) = fails(&ccob_v2(Method::Zlib, declared as u32, &zlib_bomb(500_000)));
    assert!(
        e.ends_with("decompresses to more than 104857600 bytes"),
        "{e}"
    );
    assert!(peak < SMALL, "peak {peak} bytes while rejecting");
}

#[test]
fn bomb_smaller_than_declared_is_refused_without_allocating_the_declared_size() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // zstd: 200 blocks = 25 MiB real from 806 bytes, then 4000 bytes after the frame so that
    // 120 MiB stays within the 32768:1 bound (4806 * 32768 = 157 MB).
    let declared = 120 << 20;
    let mut s = zstd_bomb(200);
    s.resize(s.len() + 4000, 0);
    let (e, peak) = fails(&ccob_v3(Method::Zstd, declared, &s));
    assert_eq!(e, format!("compressed offload bundle at offset 0x1000: declared uncompressed size {declared} but the payload decompresses to {} bytes", 24 + (200u64 << 17)));
    assert!(peak < SMALL, "peak {peak} bytes while rejecting");
    // zlib: 1 + 258 * 100_000 bytes (~25 MiB) real from ~160 KiB, 120 MiB declared.
    let (e, peak) = fails(&ccob_v2(Method::Zlib, declared as u32, &zlib_bomb(100_000)));
    assert!(
        e.ends_with(&format!("decompresses to {} bytes", 24 + 1 + 258 * 100_000)),
        "{e}"
    );
    assert!(peak < SMALL, "peak {peak} bytes while rejecting");
}

#[test]
fn payload_that_is_not_a_bundle_is_refused_after_its_first_bytes() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // 2 GiB of zeros from 64 KiB of zstd RLE blocks, honestly declared: refused at the missing
    // magic, without decompressing (or allocating) the rest.
    let mut s = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x50];
    for i in 0..16384u32 {
        let header = (128 * 1024) << 3 | 1 << 1 | u32::from(i == 16383);
        s.extend_from_slice(&header.to_le_bytes()[..3]);
        s.push(0);
    }
    let (e, peak) = fails(&ccob_v3(Method::Zstd, 2 << 30, &s));
    assert!(e.ends_with("the payload does not decompress to an offload bundle (no __CLANG_OFFLOAD_BUNDLE__ magic)"), "{e}");
    assert!(peak < SMALL, "peak {peak} bytes while rejecting");
}
