package swacache

// Test doubles shared by the store tests: a Go map store, a failing or
// panicking store, and a one-step prefill.

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
)

// mapStore is a Go map store, as an engine would write one.
type mapStore struct {
	mu       sync.Mutex
	m        map[string][]byte
	released atomic.Int32
}

func newMapStore() *mapStore { return &mapStore{m: map[string][]byte{}} }

func (s *mapStore) Put(key, blob []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[string(key)] = blob // The binding hands over fresh copies.
	return nil
}

func (s *mapStore) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[string(key)]
	if !ok {
		return nil, fmt.Errorf("no blob %q: %w", key, ErrNotFound)
	}
	return b, nil
}

func (s *mapStore) Exists(key []byte) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[string(key)]
	return ok, nil
}

func (s *mapStore) Remove(key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[string(key)]; !ok {
		return ErrNotFound
	}
	delete(s.m, string(key))
	return nil
}

func (s *mapStore) Release() { s.released.Add(1) }

// faultStore fails or panics in every call as told.
type faultStore struct {
	err   error
	panic any
	blob  []byte // returned by Get when err and panic are nil
}

func (s *faultStore) do() error {
	if s.panic != nil {
		panic(s.panic)
	}
	return s.err
}
func (s *faultStore) Put(key, blob []byte) error { return s.do() }
func (s *faultStore) Get(key []byte) ([]byte, error) {
	if err := s.do(); err != nil {
		return nil, err
	}
	return s.blob, nil
}
func (s *faultStore) Exists(key []byte) (bool, error) { return false, s.do() }
func (s *faultStore) Remove(key []byte) error         { return s.do() }

// prefill plans and runs one step of n tokens on slot.
func prefill(t testing.TB, c *Cache, p *Plan, r *rand.Rand, st *seqState, n int) {
	t.Helper()
	stepAll(t, c, p, r, []*seqState{st}, []int{n}, false)
	st.next += n
}
