#ifndef CIMAGING_CAIRO_H
#define CIMAGING_CAIRO_H

// cairo, loaded with dlopen(3) the first time a variant is rendered, not linked: libcairo pulls
// in X11, xcb, fontconfig, freetype and pixman, which a run without thumbnails or transformers
// would otherwise load (and keep resident) for nothing. The types come from cairo's header;
// each ic_cairo_* function calls the cairo function of the same name.
#include <cairo/cairo.h>

/// Loads libcairo.so.2 and its functions once; 1 when they are all there, 0 otherwise.
int ic_cairo_load(void);

#define IC_CAIRO_FUNCTIONS(X) \
  X(cairo_surface_t *, cairo_image_surface_create, (cairo_format_t format, int width, int height), (format, width, height)) \
  X(cairo_status_t, cairo_surface_status, (cairo_surface_t *surface), (surface)) \
  X(void, cairo_surface_destroy, (cairo_surface_t *surface), (surface)) \
  X(void, cairo_surface_flush, (cairo_surface_t *surface), (surface)) \
  X(void, cairo_surface_mark_dirty, (cairo_surface_t *surface), (surface)) \
  X(unsigned char *, cairo_image_surface_get_data, (cairo_surface_t *surface), (surface)) \
  X(int, cairo_image_surface_get_stride, (cairo_surface_t *surface), (surface)) \
  X(cairo_t *, cairo_create, (cairo_surface_t *target), (target)) \
  X(void, cairo_destroy, (cairo_t *cr), (cr)) \
  X(void, cairo_save, (cairo_t *cr), (cr)) \
  X(void, cairo_restore, (cairo_t *cr), (cr)) \
  X(void, cairo_paint, (cairo_t *cr), (cr)) \
  X(void, cairo_fill, (cairo_t *cr), (cr)) \
  X(void, cairo_stroke, (cairo_t *cr), (cr)) \
  X(void, cairo_clip, (cairo_t *cr), (cr)) \
  X(void, cairo_new_path, (cairo_t *cr), (cr)) \
  X(void, cairo_close_path, (cairo_t *cr), (cr)) \
  X(void, cairo_set_source_surface, (cairo_t *cr, cairo_surface_t *surface, double x, double y), (cr, surface, x, y)) \
  X(void, cairo_set_source_rgb, (cairo_t *cr, double red, double green, double blue), (cr, red, green, blue)) \
  X(void, cairo_set_source_rgba, (cairo_t *cr, double red, double green, double blue, double alpha), (cr, red, green, blue, alpha)) \
  X(cairo_pattern_t *, cairo_get_source, (cairo_t *cr), (cr)) \
  X(void, cairo_pattern_set_filter, (cairo_pattern_t *pattern, cairo_filter_t filter), (pattern, filter)) \
  X(void, cairo_pattern_set_extend, (cairo_pattern_t *pattern, cairo_extend_t extend), (pattern, extend)) \
  X(void, cairo_set_operator, (cairo_t *cr, cairo_operator_t op), (cr, op)) \
  X(void, cairo_set_line_width, (cairo_t *cr, double width), (cr, width)) \
  X(void, cairo_scale, (cairo_t *cr, double sx, double sy), (cr, sx, sy)) \
  X(void, cairo_translate, (cairo_t *cr, double tx, double ty), (cr, tx, ty)) \
  X(void, cairo_rotate, (cairo_t *cr, double angle), (cr, angle)) \
  X(void, cairo_transform, (cairo_t *cr, const cairo_matrix_t *matrix), (cr, matrix)) \
  X(void, cairo_matrix_init, (cairo_matrix_t *matrix, double xx, double yx, double xy, double yy, double x0, double y0), (matrix, xx, yx, xy, yy, x0, y0)) \
  X(void, cairo_move_to, (cairo_t *cr, double x, double y), (cr, x, y)) \
  X(void, cairo_line_to, (cairo_t *cr, double x, double y), (cr, x, y)) \
  X(void, cairo_rectangle, (cairo_t *cr, double x, double y, double width, double height), (cr, x, y, width, height)) \
  X(void, cairo_arc, (cairo_t *cr, double xc, double yc, double radius, double angle1, double angle2), (cr, xc, yc, radius, angle1, angle2))

#define IC_CAIRO_DECLARE(type, name, parameters, arguments) type ic_##name parameters;
IC_CAIRO_FUNCTIONS(IC_CAIRO_DECLARE)
#undef IC_CAIRO_DECLARE

#endif
