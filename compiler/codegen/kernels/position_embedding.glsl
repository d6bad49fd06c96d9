// result[t, :] = table[start_position + t, :]. Grid (T, ceil(HIDDEN / (WORKGROUP · LOADS)), 1): each
// invocation copies LOADS elements of the row, their loads issued together.
void main() {
  uint t = gl_WorkGroupID.x, first = gl_WorkGroupID.y * WORKGROUP * LOADS + gl_LocalInvocationID.x;
  uint position = min(state_.position + t, POSITIONS - 1);
  float values[LOADS];
  [[unroll]] for (uint u = 0; u < LOADS; ++u)
    values[u] = load_table(position * HIDDEN + min(first + u * WORKGROUP, HIDDEN - 1u));
  [[unroll]] for (uint u = 0; u < LOADS; ++u)
    if (first + u * WORKGROUP < HIDDEN) store_result(t * HIDDEN + first + u * WORKGROUP, values[u]);
}
