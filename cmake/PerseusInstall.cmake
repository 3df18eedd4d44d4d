# perseus_install_for_prefix(SOURCE DESTINATION NAME FROM1 TO1 [FROM2 TO2 ...]): installs SOURCE as
# DESTINATION/NAME (relative to the install prefix) with each FROMi replaced by TOi, where @P@ in
# TOi stands for the prefix given at install time (`cmake --install build --prefix DIR`), which a
# configure_file() cannot know. Used for the pkg-config file and the systemd unit.
function(perseus_install_for_prefix source destination name)
  set(replace "")
  set(pairs ${ARGN})
  while(pairs)
    list(POP_FRONT pairs from to)
    string(REPLACE "@P@" "\${CMAKE_INSTALL_PREFIX}" to "${to}")
    string(APPEND replace "  string(REPLACE \"${from}\" \"${to}\" text \"\${text}\")\n")
  endwhile()
  install(CODE "
  file(READ \"${source}\" text)
${replace}  message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${destination}/${name}\")
  file(WRITE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${destination}/${name}\" \"\${text}\")
")
endfunction()
