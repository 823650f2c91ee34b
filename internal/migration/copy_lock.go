package migration

import (
	"context"
	"fmt"

	"github.com/recast-osc/recast/internal/copier"
	"github.com/recast-osc/recast/internal/pipeline"
	"github.com/recast-osc/recast/internal/status"
)

// Copy lock modes (Plan.CopyLock, status Copy.Lock).
const (
	copyLockFree  = "lock-free"
	copyLockShare = "share"
)

// copyLockMode decides how copy chunks read the source (Options.CopyLock):
// lock-free, or share (LOCK IN SHARE MODE) when asked for or when the
// server does not make commits visible in binlog order. why says why.
func (m *migrator) copyLockMode(ctx context.Context) (mode, why string, err error) {
	if m.opts.CopyLock == "share" {
		return copyLockShare, "--copy-lock=share", nil
	}
	ok, why, err := copier.LockFreeSupport(ctx, m.db)
	if err != nil {
		return "", "", err
	}
	if !ok {
		return copyLockShare, "fallback: " + why, nil
	}
	return copyLockFree, "the server makes commits visible in binlog order", nil
}

// lockFreeCopy decides the copy lock mode and, for a lock-free copy,
// creates the watermark table marksQ.
func (m *migrator) lockFreeCopy(ctx context.Context, marksQ string, keyCols []string) (lockFree bool, why string, err error) {
	mode, why, err := m.copyLockMode(ctx)
	if err != nil {
		return false, "", err
	}
	if mode != copyLockFree {
		m.rt.Logger.Warn("the copy locks the rows it reads (LOCK IN SHARE MODE)", "reason", why)
		return false, why, nil
	}
	if err := copier.CreateMarks(ctx, m.db, marksQ); err != nil {
		return false, "", err
	}
	if pipeline.ExactKey(m.source, keyCols) {
		m.rt.Logger.Info("lock-free copy: chunks read without row locks; changes to a chunk's range wait for it")
	} else {
		m.rt.Logger.Info("lock-free copy: chunks read without row locks; the chunk key is not compared exactly here (text under a collation, DECIMAL, temporal, BINARY), so every change waits for the chunks running when it is read")
	}
	return true, why, nil
}

// planCopyLock fills the dry run's copy lock mode (copy method only).
func (m *migrator) planCopyLock(ctx context.Context, p *Plan) error {
	if p.Method != MethodCopy {
		return nil
	}
	mode, why, err := m.copyLockMode(ctx)
	if err != nil {
		return err
	}
	p.CopyLock, p.CopyLockReason = mode, why
	return nil
}

// describeCopyLock is the dry run's line for the copy lock mode.
func (p *Plan) describeCopyLock() string {
	if p.CopyLock == "" {
		return ""
	}
	what := "chunks read without row locks; changes to a chunk's key range wait until it is written"
	if p.CopyLock == copyLockShare {
		what = "chunks read with LOCK IN SHARE MODE"
	}
	return fmt.Sprintf("copy lock:    %s (%s; %s)\n", p.CopyLock, what, p.CopyLockReason)
}

// copyLockState is what the status shows about the copy lock mode.
type copyLockState struct {
	mode, why string
	def       *pipeline.Deferrer // nil unless lock-free
}

// setCopyLock records the copy lock mode for the status.
func (c *Control) setCopyLock(lockFree bool, why string, def *pipeline.Deferrer) {
	mode := copyLockShare
	if lockFree {
		mode = copyLockFree
	}
	c.mu.Lock()
	c.copyLock = copyLockState{mode: mode, why: why, def: def}
	c.mu.Unlock()
}

// copyLockStatus fills the snapshot's copy lock fields (c.mu held).
func (c *Control) copyLockStatus(s *status.Snapshot) {
	cl := c.copyLock
	s.Copy.Lock, s.Copy.LockReason = cl.mode, cl.why
	if cl.def != nil {
		st := cl.def.Stats()
		s.Copy.Deferral = &status.Deferral{HeldNow: st.HeldNow, MaxHeld: st.MaxHeld, RangesOpen: st.Open,
			Held: st.Held, Released: st.Released, Ranges: st.Ranges, Skipped: st.Skipped}
	}
}
