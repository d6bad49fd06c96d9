// gerbil-opt: mlir-opt for the gerbil dialect and passes (used by the lit tests).
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::gerbil::GerbilDialect, mlir::func::FuncDialect>();
  mlir::gerbil::registerGerbilPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "gerbil optimizer driver\n", registry));
}
