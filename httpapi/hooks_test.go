package httpapi

import "time"

// HoldQRSlots takes every QR render slot and makes a request wait d for
// one, for the tests of the 503; the returned func gives the slots back.
// Call it with no QR request in flight.
func (s *Server) HoldQRSlots(d time.Duration) (release func()) {
	s.qrWait = d
	for range cap(s.qrSlots) {
		s.qrSlots <- struct{}{}
	}
	return func() {
		for range cap(s.qrSlots) {
			<-s.qrSlots
		}
	}
}
