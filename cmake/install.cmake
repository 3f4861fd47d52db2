# Installation and the CMake package. Runnel::runnel links every library; the libraries are
# static, so their own dependencies come along (found again by RunnelConfig.cmake).
include(CMakePackageConfigHelpers)

set(RUNNEL_LIBRARIES runnel_ops runnel_placement runnel_storage runnel_net runnel_tf runnel_keras
    runnel_actors)
if(RUNNEL_HAVE_CUDA)
  list(APPEND RUNNEL_LIBRARIES runnel_cuda)
endif()

# The umbrella target (the executable `runnel` has the plain name): Runnel::runnel outside,
# in the build tree and once installed.
add_library(runnel_all INTERFACE)
target_link_libraries(runnel_all INTERFACE ${RUNNEL_LIBRARIES})
set_target_properties(runnel_all PROPERTIES EXPORT_NAME runnel)
add_library(Runnel::runnel ALIAS runnel_all)
foreach(lib ${RUNNEL_LIBRARIES})
  string(REPLACE "runnel_" "" short ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${short})
endforeach()

install(TARGETS ${RUNNEL_LIBRARIES} runnel_internal runnel_all EXPORT RunnelTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS runnel runnel-node RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Public headers. Internal ones (they include generated, Eigen, CAF or library headers a
# consumer need not have) stay behind; tests/headers checks every installed one compiles alone.
set(RUNNEL_INTERNAL_HEADERS
    actors/exec/internal.hpp actors/exec/session_impl.hpp actors/exec/device_executor.hpp actors/exec/flow.hpp
    actors/exec/firing.hpp
    net/endpoint_impl.hpp net/tensor_codec.hpp
    ops/core/eigen_access.hpp ops/layers/control_flow_internal.hpp ops/grad/gradients_internal.hpp
    ops/cpu/conv_dnnl.hpp ops/cpu/conv_rows.hpp ops/cpu/lstm_math.hpp ops/cpu/matmul_dnnl.hpp
    ops/cpu/kernels.hpp ops/optimize/rewrite.hpp actors/exec/providers.hpp
    ops/cuda/gpu_context.hpp ops/cuda/cublas_api.hpp ops/cuda/kernels.hpp ops/cuda/cuda_kernel.hpp
    ops/cuda/graph_cache.hpp
    ops/defs/op_util.hpp ops/graph/builder_util.hpp
    actors/data/stages.hpp actors/data/autotune.hpp actors/data/record_places.hpp
    actors/cluster/master_impl.hpp
    storage/tf/tf_types.hpp storage/keras/keras_layers.hpp)
foreach(module ops placement storage net actors)
  file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/${module}/*.hpp)
  foreach(h ${headers})
    if(NOT h IN_LIST RUNNEL_INTERNAL_HEADERS)
      get_filename_component(dir ${h} DIRECTORY)
      install(FILES ${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/runnel/${dir})
      list(APPEND RUNNEL_PUBLIC_HEADERS ${h})
    endif()
  endforeach()
endforeach()
# The umbrella header, <runnel/runnel.hpp>: what users' code includes.
install(FILES runnel.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/runnel)
list(APPEND RUNNEL_PUBLIC_HEADERS runnel.hpp)
# The list, for the header check (tests/headers/check_headers.sh).
string(REPLACE ";" "\n" public_list "${RUNNEL_PUBLIC_HEADERS}")
file(WRITE ${PROJECT_BINARY_DIR}/public_headers.txt "${public_list}\n")
install(FILES ${PROJECT_BINARY_DIR}/public_headers.txt
        DESTINATION ${CMAKE_INSTALL_DATADIR}/runnel)

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Runnel)
install(EXPORT RunnelTargets NAMESPACE Runnel:: DESTINATION ${config_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/RunnelConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/RunnelConfig.cmake
                              INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/RunnelConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/RunnelConfig.cmake ${PROJECT_BINARY_DIR}/RunnelConfigVersion.cmake
        DESTINATION ${config_dir})

# pkg-config: the libraries in link order, then what they need.
# The sync runner and the executor's providers register themselves (actors/CMakeLists.txt):
# programs must take their archive members.
set(pc_libs "")
foreach(linked ${runnel_self_registering})
  string(APPEND pc_libs " -Wl,--undefined=runnel_${linked}_linked")
endforeach()
foreach(lib runnel_actors runnel_keras runnel_tf runnel_net runnel_storage runnel_placement
            runnel_cuda runnel_ops)
  if(TARGET ${lib})
    string(APPEND pc_libs " -l${lib}")
  endif()
endforeach()
set(pc_deps "")
foreach(path ${CAF_IO_LIBRARY} ${CAF_CORE_LIBRARY} ${RUNNEL_HDF5_LIBRARIES} ${OPENBLAS_LIBRARY}
             ${DNNL_LIBRARY} ${GOMP_LIBRARY} ${JEMALLOC_LIBRARY})
  if(path MATCHES "^/")
    string(APPEND pc_deps " ${path}")
  endif()
endforeach()
if(RUNNEL_HAVE_CUDA)
  string(APPEND pc_deps " -L${CUDAToolkit_LIBRARY_DIR} -lcudnn -lcudart_static"
         " -lculibos -ldl -lrt")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/runnel.pc.in ${PROJECT_BINARY_DIR}/runnel.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/runnel.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
