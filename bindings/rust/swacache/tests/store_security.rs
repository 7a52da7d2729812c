//! Authenticated blobs and tenant namespaces (issue 33): `Config::store_secret`
//! and `Config::store_namespace`, caches sharing one directory store.
mod common;
use common::*;
use swacache::*;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

fn cache_on(dir: &std::path::Path, secret: &[u8], namespace: &[u8]) -> Cache {
    let cfg = Config { store_secret: StoreSecret(secret.to_vec()), store_namespace: namespace.to_vec(), ..config() };
    let cache = Cache::new(&cfg).expect("cache");
    cache.set_store(Store::directory(dir, true, false).unwrap()).unwrap();
    cache
}

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("swacache-rust-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn tagged_blobs_need_the_same_secret() {
    let dir = temp("secret");
    let tagged = cache_on(&dir, SECRET, b"");
    let a = tagged.alloc_slot().unwrap();
    fill(&tagged, a, 5, 1);
    tagged.save(a, b"req").unwrap();
    let b = tagged.alloc_slot().unwrap();
    tagged.restore(b, b"req").unwrap();
    assert_eq!(ring_bytes(&tagged, b), ring_bytes(&tagged, a));
    for secret in [&b""[..], &b"another secret of 32 bytes......"[..]] {
        let other = cache_on(&dir, secret, b"");
        let s = other.alloc_slot().unwrap();
        fill(&other, s, 3, 2);
        let before = ring_bytes(&other, s);
        assert_eq!(other.restore(s, b"req").unwrap_err().code, Code::DataLoss);
        assert_eq!(ring_bytes(&other, s), before, "a refused restore changed the slot");
        other.save(s, b"plain").unwrap();
    }
    let c = tagged.alloc_slot().unwrap();
    assert_eq!(tagged.restore(c, b"plain").unwrap_err().code, Code::DataLoss);
    let short = Config { store_secret: StoreSecret(vec![1; 15]), ..config() };
    assert_eq!(Cache::new(&short).err().unwrap().code, Code::InvalidArgument);
    assert!(!format!("{:?}", StoreSecret(SECRET.to_vec())).contains("0123"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn namespaces_isolate_equal_keys() {
    let dir = temp("namespace");
    let ca = cache_on(&dir, b"", b"tenant-a");
    let cb = cache_on(&dir, SECRET, b"tenant-b");
    let (a0, a1) = (ca.alloc_slot().unwrap(), ca.alloc_slot().unwrap());
    let (b0, b1) = (cb.alloc_slot().unwrap(), cb.alloc_slot().unwrap());
    fill(&ca, a0, 5, 3);
    fill(&cb, b0, 6, 4);
    ca.save(a0, b"shared").unwrap();
    assert!(ca.store_exists(b"shared").unwrap());
    assert!(!cb.store_exists(b"shared").unwrap());
    assert_eq!(cb.store_probe(&[&b"x"[..], b"shared"]).unwrap(), None);
    assert_eq!(ca.store_probe(&[&b"x"[..], b"shared"]).unwrap(), Some(1));
    assert_eq!(cb.restore(b1, b"shared").unwrap_err().code, Code::NotFound);
    assert_eq!(cb.store_remove(b"shared").unwrap_err().code, Code::NotFound);
    cb.save(b0, b"shared").unwrap();
    ca.restore(a1, b"shared").unwrap();
    cb.restore(b1, b"shared").unwrap();
    assert_eq!(ring_bytes(&ca, a1), ring_bytes(&ca, a0));
    assert_eq!(ring_bytes(&cb, b1), ring_bytes(&cb, b0));
    ca.store_remove(b"shared").unwrap();
    assert!(cb.store_exists(b"shared").unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}
