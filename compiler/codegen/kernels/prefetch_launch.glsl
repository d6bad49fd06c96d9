// A launch that only loads weights into the L2 or touches their pages (prefetch.glsl's workers, for
// gerbil-prefetch-weights' ranges; gerbilc --prefetch-beside). It is recorded right after a decode attention
// with no barrier between them, so its workgroups run on the multiprocessors the attention leaves idle, with
// the few registers the loads need, instead of as extra workgroups of the attention kernel, which take its
// registers (Llama-3-8B's: 254, a multiprocessor each) and end its launch late. Worker w is workgroup w.
void main() { prefetchWeights(gl_WorkGroupID.x); }
