# Cython declarations of the C kernels (src/kernels/*.h), one .pxd per header, for the compiled modules to
# cimport (`from bankml.kernels.matmul cimport bk_matrix`). Declarations only: nothing here is compiled or
# imported at run time. This file makes the folder a package for cimport.
