// result[t, :] = table[ids[t], :]. Grid (T, 1, 1). Ids are checked against the vocabulary on the host.
void main() {
  uint t = gl_WorkGroupID.x;
  uint id = min(uint(ids[t]), VOCAB - 1);
  for (uint i = gl_LocalInvocationID.x; i < HIDDEN; i += WORKGROUP) store_result(t * HIDDEN + i, load_table(id * HIDDEN + i));
}
