package gorgoniatrack

import gorgonia "gorgonia.org/tensor"

// stdOps are the operations of gorgonia's StdEng that an Engine runs on
// its memory: gorgonia finds an operation by asking a Dense's engine for
// its interface (Dense.Add asks for an Adder). An Engine holds StdEng as
// this interface rather than embedding it, so that StdEng's unexported
// makeArray, which gorgonia prefers to Alloc and which allocates Go memory
// no tracker sees, is not promoted to the Engine. An operation that makes
// its result with Clone allocates through the Engine (Add, Sub, Exp...);
// one that makes it with gorgonia's own StdEng (Sum, Argmax...) returns Go
// memory, untracked.
type stdOps interface {
	gorgonia.Adder
	gorgonia.Suber
	gorgonia.Muler
	gorgonia.Diver
	gorgonia.Power
	gorgonia.Moder
	gorgonia.FMAer
	gorgonia.MatMuler
	gorgonia.MatVecMuler
	gorgonia.OuterProder
	gorgonia.Dotter
	gorgonia.SVDer
	gorgonia.Lter
	gorgonia.Lteer
	gorgonia.Gter
	gorgonia.Gteer
	gorgonia.ElEqer
	gorgonia.MinBetweener
	gorgonia.MaxBetweener
	gorgonia.Transposer
	gorgonia.Concater
	gorgonia.DenseStacker
	gorgonia.Repeater
	gorgonia.Diager
	gorgonia.Tracer
	gorgonia.InnerProder
	gorgonia.Mapper
	gorgonia.Neger
	gorgonia.Inver
	gorgonia.Squarer
	gorgonia.Cuber
	gorgonia.Exper
	gorgonia.Tanher
	gorgonia.Loger
	gorgonia.Sqrter
	gorgonia.Cbrter
	gorgonia.InvSqrter
	gorgonia.Signer
	gorgonia.Abser
	gorgonia.Clamper
	gorgonia.Reducer
	gorgonia.OptimizedReducer
	gorgonia.Sumer
	gorgonia.Miner
	gorgonia.Maxer
	gorgonia.Argmaxer
	gorgonia.Argminer
	gorgonia.ByIndiceser
	gorgonia.SoftMaxer
}
