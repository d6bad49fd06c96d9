#include "gerbil/Dialect/GerbilDialect.h"

using namespace mlir;
using namespace mlir::gerbil;

#include "gerbil/Dialect/GerbilOpsDialect.cpp.inc"

void GerbilDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "gerbil/Dialect/GerbilOps.cpp.inc"
      >();
}
