package swacache

/*
#include <stdlib.h>
#include "capi.h"

static swago_ret swago_msg(swa_status_t st, const char* msg) {
  swago_ret r;
  r.status = (int)st;
  r.msg = st == SWA_OK ? NULL : strdup(msg);
  return r;
}

// Direct calls into a built-in store's table, for use from Go.
static swago_ret swago_tbl_put(const swa_kv_store_t* t, const uint8_t* k, size_t kl, void* data,
                               size_t n) {
  char msg[SWA_STORE_MESSAGE_BYTES] = "";
  swa_iov_t iov;
  iov.data = data;
  iov.size = n;
  return swago_msg(t->put(t->user_data, k, kl, &iov, data ? 1 : 0, msg, sizeof msg), msg);
}
static swago_ret swago_tbl_get(const swa_kv_store_t* t, const uint8_t* k, size_t kl, void* data,
                               size_t n, uint64_t* size) {
  char msg[SWA_STORE_MESSAGE_BYTES] = "";
  swa_iov_t iov;
  iov.data = data;
  iov.size = n;
  *size = n;
  return swago_msg(t->get(t->user_data, k, kl, &iov, data ? 1 : 0, size, msg, sizeof msg), msg);
}
static swago_ret swago_tbl_exists(const swa_kv_store_t* t, const uint8_t* k, size_t kl,
                                  uint32_t* e) {
  char msg[SWA_STORE_MESSAGE_BYTES] = "";
  return swago_msg(t->exists(t->user_data, k, kl, e, msg, sizeof msg), msg);
}
static swago_ret swago_tbl_remove(const swa_kv_store_t* t, const uint8_t* k, size_t kl) {
  char msg[SWA_STORE_MESSAGE_BYTES] = "";
  return swago_msg(t->remove(t->user_data, k, kl, msg, sizeof msg), msg);
}
static void swago_tbl_release(const swa_kv_store_t* t) {
  if (t->release) t->release(t->user_data);
}

static swago_ret swago_memory_create(uint64_t budget, swa_kv_store_t* out) {
  swa_store_memory_config_t c;
  swa_store_memory_config_init(&c);
  c.budget_bytes = budget;
  swa_kv_store_init(out);
  return swago_r(swa_store_memory_create(&c, out));
}
static swago_ret swago_memory_stats(const swa_kv_store_t* t, swa_store_memory_stats_t* out) {
  return swago_r(swa_store_memory_stats(t, out));
}
static swago_ret swago_directory_create(const char* path, uint32_t create, uint32_t sync,
                                        swa_kv_store_t* out) {
  swa_store_directory_config_t c;
  swa_store_directory_config_init(&c);
  c.path = path;
  c.create = create;
  c.sync = sync;
  swa_kv_store_init(out);
  return swago_r(swa_store_directory_create(&c, out));
}
// The ACL user and TLS fields of both Redis configs (RedisSecurity).
typedef struct swago_redis_sec {
  const char* username;
  uint32_t tls;
  uint32_t verify;
  const char* ca_file;
  const char* ca_dir;
  const char* cert_file;
  const char* key_file;
  const char* server_name;
} swago_redis_sec;
#define SWAGO_SET_REDIS_SEC(c, s)    \
  do {                               \
    (c).username = (s)->username;    \
    (c).tls = (s)->tls;              \
    (c).tls_verify = (s)->verify;    \
    (c).tls_ca_file = (s)->ca_file;  \
    (c).tls_ca_dir = (s)->ca_dir;    \
    (c).tls_cert_file = (s)->cert_file; \
    (c).tls_key_file = (s)->key_file; \
    (c).tls_server_name = (s)->server_name; \
  } while (0)
static swago_ret swago_redis_create(const char* host, uint32_t port, uint32_t db,
                                    const char* password, uint32_t ttl, uint32_t timeout_ms,
                                    uint32_t max_conn, const swago_redis_sec* sec,
                                    swa_kv_store_t* out) {
  swa_store_redis_config_t c;
  swa_store_redis_config_init(&c);
  SWAGO_SET_REDIS_SEC(c, sec);
  if (host) c.host = host;
  if (port) c.port = port;
  c.db = db;
  c.password = password;
  c.ttl_seconds = ttl;
  if (timeout_ms) c.timeout_ms = timeout_ms;
  if (max_conn) c.max_connections = max_conn;
  swa_kv_store_init(out);
  return swago_r(swa_store_redis_create(&c, out));
}
static swago_ret swago_redis_cluster_create(const char* nodes, const char* password, uint32_t ttl,
                                            uint32_t timeout_ms, uint32_t per_node,
                                            uint32_t replicas, uint32_t attempts,
                                            const swago_redis_sec* sec, swa_kv_store_t* out) {
  swa_store_redis_cluster_config_t c;
  swa_store_redis_cluster_config_init(&c);
  SWAGO_SET_REDIS_SEC(c, sec);
  if (nodes) c.nodes = nodes;
  c.password = password;
  c.ttl_seconds = ttl;
  if (timeout_ms) c.timeout_ms = timeout_ms;
  if (per_node) c.connections_per_node = per_node;
  c.read_from_replicas = replicas;
  if (attempts) c.max_attempts = attempts;
  swa_kv_store_init(out);
  return swago_r(swa_store_redis_cluster_create(&c, out));
}
*/
import "C"

import (
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// noNUL refuses a string that C would read cut short at an embedded NUL.
func noNUL(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if strings.IndexByte(fields[i+1], 0) >= 0 {
			return errorf(CodeInvalidArgument, "%s contains a NUL byte", fields[i])
		}
	}
	return nil
}

// DefaultMemoryBudget is the memory store's default budget (1 GiB).
const DefaultMemoryBudget = 1 << 30

// BuiltinStore is one of the library's own stores (memory, directory,
// Redis). It implements Store, so Go code can use it directly, and
// Cache.SetStore hands it to the cache as the library's own table (no Go in
// the save/restore path); the cache then owns it and this value is closed.
// An unattached store is freed by Close. All methods are thread-safe; the
// stores themselves are safe to use from many goroutines.
type BuiltinStore struct {
	mu   sync.RWMutex // Read-held by calls, write-held by Close and attach.
	tbl  C.swa_kv_store_t
	live bool
	// The Go stores bridged as tiers (of this tiered store, or of a tiered
	// store it holds): attach binds them to the cache, so that their
	// callbacks count as that cache's (Close from inside one is refused
	// rather than waiting for the call that runs it).
	goTiers []*boundStore
}

func newBuiltin(tbl C.swa_kv_store_t) *BuiltinStore {
	s := &BuiltinStore{tbl: tbl, live: true}
	runtime.SetFinalizer(s, func(s *BuiltinStore) { s.Close() })
	return s
}

// NewMemoryStore creates an in-process memory store holding at most
// budgetBytes (keys + blobs), evicting least recently used blobs
// (swa_store_memory_create). A zero budget is INVALID_ARGUMENT.
func NewMemoryStore(budgetBytes uint64) (*BuiltinStore, error) {
	var t C.swa_kv_store_t
	if err := result(C.swago_memory_create(C.uint64_t(budgetBytes), &t)); err != nil {
		return nil, err
	}
	return newBuiltin(t), nil
}

// DirectoryStoreConfig configures NewDirectoryStore; the zero value of the
// flags is the library's default (create the root, fsync every put).
type DirectoryStoreConfig struct {
	Path     string // Root directory.
	NoCreate bool   // Fail with NOT_FOUND instead of creating a missing root.
	NoSync   bool   // Skip the fsyncs: atomic for readers, not durable.
}

// NewDirectoryStore creates a store with one file per key under cfg.Path,
// published by atomic rename (swa_store_directory_create).
func NewDirectoryStore(cfg DirectoryStoreConfig) (*BuiltinStore, error) {
	if err := noNUL("Path", cfg.Path); err != nil {
		return nil, err
	}
	path := C.CString(cfg.Path)
	defer C.free(unsafe.Pointer(path))
	var t C.swa_kv_store_t
	if err := result(C.swago_directory_create(path, cbool(!cfg.NoCreate), cbool(!cfg.NoSync), &t)); err != nil {
		return nil, err
	}
	return newBuiltin(t), nil
}

// RedisSecurity is the ACL user and TLS settings of NewRedisStore and
// NewRedisClusterStore (docs/store.md, "Redis TLS and ACL users"). The zero
// value is the default user over plain TCP. With TLS the server's
// certificate is verified (chain and name) unless NoTLSVerify. A certificate
// that fails verification, a refused client certificate or a wrong user give
// ErrUnauthenticated, an ACL user lacking a command ErrPermissionDenied, a
// plain/TLS port mix-up ErrUnavailable; each message names the server.
type RedisSecurity struct {
	Username      string // ACL user (AUTH username password); needs Password. "": the default user.
	TLS           bool   // TLS on every connection (TLS 1.2 or later).
	NoTLSVerify   bool   // Skip certificate verification: encryption only (tests).
	TLSCAFile     string // PEM file of trusted CAs; with TLSCADir "": the system's CA paths.
	TLSCADir      string // Folder of hashed CA certificates (openssl rehash).
	TLSCertFile   string // PEM client certificate (chain), with TLSKeyFile.
	TLSKeyFile    string // PEM private key of TLSCertFile.
	TLSServerName string // SNI and the name checked; "": the host connected to (each node's address).
}

// cfg returns the C view of s (strings allocated) and the function that frees them.
func (s RedisSecurity) cfg() (*C.swago_redis_sec, func(), error) {
	if err := noNUL("Username", s.Username, "TLSCAFile", s.TLSCAFile, "TLSCADir", s.TLSCADir,
		"TLSCertFile", s.TLSCertFile, "TLSKeyFile", s.TLSKeyFile, "TLSServerName", s.TLSServerName); err != nil {
		return nil, nil, err
	}
	c := (*C.swago_redis_sec)(C.calloc(1, C.size_t(unsafe.Sizeof(C.swago_redis_sec{}))))
	var owned []*C.char
	str := func(v string) *C.char {
		if v == "" {
			return nil
		}
		p := C.CString(v)
		owned = append(owned, p)
		return p
	}
	c.username = str(s.Username)
	c.tls = cbool(s.TLS)
	c.verify = cbool(!s.NoTLSVerify)
	c.ca_file, c.ca_dir = str(s.TLSCAFile), str(s.TLSCADir)
	c.cert_file, c.key_file = str(s.TLSCertFile), str(s.TLSKeyFile)
	c.server_name = str(s.TLSServerName)
	return c, func() {
		for _, p := range owned {
			C.free(unsafe.Pointer(p))
		}
		C.free(unsafe.Pointer(c))
	}, nil
}

// RedisStoreConfig configures NewRedisStore; zero fields take the library's
// defaults (127.0.0.1:6379, db 0, no password, no TTL, 5 s timeout, 8
// pooled connections).
type RedisStoreConfig struct {
	Host           string        // Server host name or address.
	Port           uint32        // TCP port.
	DB             uint32        // Database number.
	Password       string        // AUTH password; "" for none.
	TTLSeconds     uint32        // Expiry of each blob; 0 = none.
	TimeoutMs      uint32        // Connect and command timeout.
	MaxConnections uint32        // Idle connections kept for reuse.
	Security       RedisSecurity // ACL user and TLS.
}

// NewRedisStore creates a store on a Redis server (swa_store_redis_create;
// experimental in the C API). UNAVAILABLE when the server cannot be reached,
// UNAUTHENTICATED when AUTH fails or the server's certificate fails
// verification, UNIMPLEMENTED in a build without hiredis.
func NewRedisStore(cfg RedisStoreConfig) (*BuiltinStore, error) {
	if err := noNUL("Host", cfg.Host, "Password", cfg.Password); err != nil {
		return nil, err
	}
	sec, free, err := cfg.Security.cfg()
	if err != nil {
		return nil, err
	}
	defer free()
	var host, pass *C.char
	if cfg.Host != "" {
		host = C.CString(cfg.Host)
		defer C.free(unsafe.Pointer(host))
	}
	if cfg.Password != "" {
		pass = C.CString(cfg.Password)
		defer C.free(unsafe.Pointer(pass))
	}
	var t C.swa_kv_store_t
	if err := result(C.swago_redis_create(host, C.uint32_t(cfg.Port), C.uint32_t(cfg.DB), pass,
		C.uint32_t(cfg.TTLSeconds), C.uint32_t(cfg.TimeoutMs), C.uint32_t(cfg.MaxConnections), sec, &t)); err != nil {
		return nil, err
	}
	return newBuiltin(t), nil
}

// RedisClusterStoreConfig configures NewRedisClusterStore; zero fields take
// the library's defaults (seed "127.0.0.1:7000", no password, no TTL, 5 s
// per call, 4 idle connections per node, masters only, 16 attempts).
type RedisClusterStoreConfig struct {
	Nodes              string        // Seed nodes, "host:port,host:port" ("[v6]:port" for IPv6).
	Password           string        // AUTH password of every node; "" for none.
	TTLSeconds         uint32        // Expiry of each blob; 0 = none.
	TimeoutMs          uint32        // Deadline of one store call, retries included.
	ConnectionsPerNode uint32        // Idle connections kept per node.
	ReadFromReplicas   bool          // Gets and exists read a replica of the slot.
	MaxAttempts        uint32        // Tries per call (redirects, reconnects, back-offs).
	Security           RedisSecurity // ACL user and TLS, for every node (redirect targets included).
}

// NewRedisClusterStore creates a store on a Redis Cluster, routed by hash
// slot (swa_store_redis_cluster_create; experimental in the C API).
// INVALID_ARGUMENT for malformed Nodes, UNAVAILABLE when no seed answers,
// UNAUTHENTICATED when AUTH fails, UNIMPLEMENTED in a build without hiredis.
func NewRedisClusterStore(cfg RedisClusterStoreConfig) (*BuiltinStore, error) {
	if err := noNUL("Nodes", cfg.Nodes, "Password", cfg.Password); err != nil {
		return nil, err
	}
	sec, free, err := cfg.Security.cfg()
	if err != nil {
		return nil, err
	}
	defer free()
	var nodes, pass *C.char
	if cfg.Nodes != "" {
		nodes = C.CString(cfg.Nodes)
		defer C.free(unsafe.Pointer(nodes))
	}
	if cfg.Password != "" {
		pass = C.CString(cfg.Password)
		defer C.free(unsafe.Pointer(pass))
	}
	var t C.swa_kv_store_t
	if err := result(C.swago_redis_cluster_create(nodes, pass, C.uint32_t(cfg.TTLSeconds),
		C.uint32_t(cfg.TimeoutMs), C.uint32_t(cfg.ConnectionsPerNode), cbool(cfg.ReadFromReplicas),
		C.uint32_t(cfg.MaxAttempts), sec, &t)); err != nil {
		return nil, err
	}
	return newBuiltin(t), nil
}

// Close frees a store that no cache took over. Closing twice, or after
// SetStore took it, is a no-op and returns nil. Close on a nil *BuiltinStore
// (its constructor failed) or a zero BuiltinStore returns an error matching
// ErrInvalidArgument and does nothing.
func (s *BuiltinStore) Close() error {
	if s == nil {
		return nilHandleError("BuiltinStore", "its constructor (NewMemoryStore, ...)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tbl.struct_size == 0 { // A zero BuiltinStore: no constructor filled it.
		return nilHandleError("BuiltinStore", "its constructor (NewMemoryStore, ...)")
	}
	if s.live {
		C.swago_tbl_release(&s.tbl)
		s.live = false
		// Only a live store has a finalizer (a zero value never had one, and
		// SetFinalizer on a value outside the heap is a fatal error).
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

func (s *BuiltinStore) attach(cp *C.swa_cache_t, cs *cacheState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.live {
		return closedError("store")
	}
	// Bound before the table is attached: once it is, other goroutines'
	// saves may run the tiers' callbacks.
	for _, b := range s.goTiers {
		b.cs = cs
	}
	if err := result(C.swago_set_store(cp, &s.tbl)); err != nil {
		for _, b := range s.goTiers {
			b.cs = nil
		}
		return err
	}
	s.live = false // The cache owns it now.
	runtime.SetFinalizer(s, nil)
	return nil
}

func (s *BuiltinStore) acquire() error {
	if s == nil {
		return nilHandleError("BuiltinStore", "its constructor (NewMemoryStore, ...)")
	}
	s.mu.RLock()
	if !s.live {
		s.mu.RUnlock()
		return closedError("store")
	}
	return nil
}

func bytePtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// Put stores blob under key (the raw key: no fingerprint prefix is added).
func (s *BuiltinStore) Put(key, blob []byte) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	data := bytePtr(blob)
	if data == nil {
		data = emptyPtr()
	}
	return result(C.swago_tbl_put(&s.tbl, keyPtr(key), C.size_t(len(key)), data, C.size_t(len(blob))))
}

// Get returns a copy of the blob under key, or an error matching ErrNotFound.
func (s *BuiltinStore) Get(key []byte) ([]byte, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var buf []byte
	for {
		var size C.uint64_t
		data := bytePtr(buf)
		if err := result(C.swago_tbl_get(&s.tbl, keyPtr(key), C.size_t(len(key)), data,
			C.size_t(len(buf)), &size)); err != nil {
			return nil, err
		}
		if uint64(size) == uint64(len(buf)) && (data != nil || size == 0) {
			return buf, nil
		}
		buf = make([]byte, int(size)) // Sized now; the blob may change meanwhile.
	}
}

// Exists reports whether a blob is stored under key.
func (s *BuiltinStore) Exists(key []byte) (bool, error) {
	if err := s.acquire(); err != nil {
		return false, err
	}
	defer s.mu.RUnlock()
	var e C.uint32_t
	err := result(C.swago_tbl_exists(&s.tbl, keyPtr(key), C.size_t(len(key)), &e))
	return e != 0, err
}

// Remove deletes the blob under key; an error matching ErrNotFound when
// there is none.
func (s *BuiltinStore) Remove(key []byte) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	return result(C.swago_tbl_remove(&s.tbl, keyPtr(key), C.size_t(len(key))))
}

// MemoryStats are the counters of a memory store (swa_store_memory_stats_t).
type MemoryStats struct {
	BudgetBytes  uint64 // The configured budget.
	Bytes        uint64 // Bytes held now (keys + blobs).
	Entries      uint64 // Blobs held now.
	Puts         uint64 // Successful puts.
	RejectedPuts uint64 // Puts of a blob larger than the whole budget.
	Hits         uint64 // Gets that found their key.
	Misses       uint64 // Gets that did not.
	Evictions    uint64 // Blobs evicted to stay within the budget.
	EvictedBytes uint64 // Bytes those evictions freed.
}

// MemoryStats reads the statistics of an unattached memory store
// (swa_store_memory_stats); INVALID_ARGUMENT for another kind of store.
func (s *BuiltinStore) MemoryStats() (MemoryStats, error) {
	if err := s.acquire(); err != nil {
		return MemoryStats{}, err
	}
	defer s.mu.RUnlock()
	var o C.swa_store_memory_stats_t
	o.struct_size = C.sizeof_swa_store_memory_stats_t
	if err := result(C.swago_memory_stats(&s.tbl, &o)); err != nil {
		return MemoryStats{}, err
	}
	return MemoryStats{BudgetBytes: uint64(o.budget_bytes), Bytes: uint64(o.bytes),
		Entries: uint64(o.entries), Puts: uint64(o.puts), RejectedPuts: uint64(o.rejected_puts),
		Hits: uint64(o.hits), Misses: uint64(o.misses), Evictions: uint64(o.evictions),
		EvictedBytes: uint64(o.evicted_bytes)}, nil
}
