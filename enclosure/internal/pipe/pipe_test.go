package pipe

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestPipeCarriesBytesInOrderThenEOF(t *testing.T) {
	p := New(64)
	for _, s := range []string{"Content-Length: 2\r\n\r\n", "{}", "tail"} {
		if n, err := p.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	p.CloseWrite()
	got, err := io.ReadAll(p)
	if err != nil || string(got) != "Content-Length: 2\r\n\r\n{}tail" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	if n, err := p.Read(make([]byte, 8)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("Read after EOF = %d, %v; want 0, EOF", n, err)
	}
}

// A full pipe makes the writer wait for the reader, as an OS pipe does,
// and nothing is lost or reordered on the way.
func TestPipeFullMakesTheWriterWait(t *testing.T) {
	p := New(4)
	msg := []byte(strings.Repeat("0123456789", 10))
	wrote := make(chan error, 1)
	go func() {
		_, err := p.Write(msg)
		p.CloseWrite()
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("a 100-byte write into a 4-byte pipe nobody reads returned (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	var got bytes.Buffer
	buf := make([]byte, 100)
	for {
		n, err := p.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if n > 4 {
			t.Fatalf("read %d bytes at once from a 4-byte pipe", n)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), msg) {
		t.Errorf("read %q, want %q", got.Bytes(), msg)
	}
}

// A reader that closes frees a writer waiting on a full pipe, and what
// comes after is dropped, so the other stream keeps flowing.
func TestPipeClosedByTheReaderDropsWrites(t *testing.T) {
	p := New(2)
	wrote := make(chan error, 1)
	go func() {
		_, err := p.Write([]byte("more than two bytes"))
		wrote <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if err != nil {
			t.Errorf("a write the reader no longer wants = %v, want nil (dropped)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a writer waiting on a full pipe was not freed by the reader's Close")
	}
	if n, err := p.Write([]byte("after")); n != 5 || err != nil {
		t.Errorf("Write after Close = %d, %v; want 5, nil", n, err)
	}
	if n, err := p.Read(make([]byte, 8)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("Read after Close = %d, %v; want 0, EOF", n, err)
	}
}

func TestOutput(t *testing.T) {
	o := NewOutput(64, nil)
	stdout, stderr := o.Writers()
	_, _ = stdout.Write([]byte("out"))
	_, _ = stderr.Write([]byte("err"))
	o.CloseWrite()
	if got, _ := io.ReadAll(o.Stdout()); string(got) != "out" {
		t.Errorf("Stdout = %q, want out", got)
	}
	if got, _ := io.ReadAll(o.Stderr()); string(got) != "err" {
		t.Errorf("Stderr = %q, want err", got)
	}
	select {
	case <-o.Done():
		t.Fatal("Done closed before End")
	default:
	}
	want := errors.New("killed")
	o.End(-1, want)
	if code, err := o.Wait(); code != -1 || err != want {
		t.Errorf("Wait = %d, %v; want -1, %v", code, err, want)
	}

	// A caller's own stderr writer takes the stream; Stderr is then nil.
	var mine bytes.Buffer
	o = NewOutput(64, &mine)
	if o.Stderr() != nil {
		t.Error("Stderr is not nil with the caller's own writer")
	}
	_, stderr = o.Writers()
	_, _ = stderr.Write([]byte("to the caller"))
	if mine.String() != "to the caller" {
		t.Errorf("the caller's writer got %q", mine.String())
	}
}
