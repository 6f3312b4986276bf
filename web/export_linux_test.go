package web

// SendRingsOffForTest makes the stream writers started from now on send
// one stream at a time, as on a kernel without io_uring; the returned
// function lets later writers use rings again. Tests using it must not run
// in parallel.
func SendRingsOffForTest() (restore func()) {
	was := ringsOff.Swap(true)
	return func() { ringsOff.Store(was) }
}
